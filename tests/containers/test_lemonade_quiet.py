"""Lemonade stays quiet: no UDP datagram leaves its container — not while lemond starts, nor
during a model load, a chat or embeddings. Debian's default config broadcasts discovery
beacons to every private-range interface; trialbox/lemonade writes `broadcast: false` (and
passes --no-broadcast) before lemond's first start, and this test proves it from inside.

How: the network namespace is made first by a holder container on a network this test made
(internal: no route out), which captures every frame the namespace sends (an AF_PACKET socket,
outgoing frames, any interface). Lemonade then starts *inside that namespace*, so the capture
sees its very first instruction; the kernel's own UDP counter for the namespace
(/proc/net/snmp `OutDatagrams`) is read too. Then the capture is shown able to fail: one planted
datagram to the test network's own broadcast address must be seen by both.
"""

from __future__ import annotations

import ipaddress
import json
import time

import docker
import httpx
from labelled_containers import new_tag, sweep_label

from runner.stack.labels import RUN_LABEL
from runner.stack.lemonade_container import start_lemonade
from runner.stack.llm_container import LLM_CPU_IMAGE

#: Captures outgoing UDP frames (IPv4 protocol 17, IPv6 next header 17) on every interface of
#: the namespace and prints one JSON line per frame: interface, destination, port.
CAPTURE = r'''
import json, socket, struct, sys
ETH_P_ALL, PACKET_OUTGOING = 0x0003, 4
sniffer = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
print(json.dumps({"capturing": True}), flush=True)
while True:
    frame, (interface, _proto, kind, _hatype, _addr) = sniffer.recvfrom(65535)
    if kind != PACKET_OUTGOING or len(frame) < 14:
        continue
    ethertype, payload = struct.unpack("!H", frame[12:14])[0], frame[14:]
    if ethertype == 0x0800 and len(payload) >= 28 and payload[9] == 17:
        header = (payload[0] & 0x0F) * 4
        port = struct.unpack("!H", payload[header + 2:header + 4])[0]
        print(json.dumps({"udp": interface, "to": socket.inet_ntoa(payload[16:20]), "port": port}), flush=True)
    elif ethertype == 0x86DD and len(payload) >= 48 and payload[6] == 17:
        port = struct.unpack("!H", payload[42:44])[0]
        print(json.dumps({"udp": interface, "to": socket.inet_ntop(socket.AF_INET6, payload[24:40]), "port": port}), flush=True)
'''

PLANT = "import socket, sys; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); " \
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1); s.sendto(b'planted', (sys.argv[1], 9))"


def udp_seen(holder: object) -> list[dict[str, object]]:
    lines = holder.logs(stdout=True, stderr=False).decode().splitlines()  # type: ignore[attr-defined]
    return [json.loads(line) for line in lines if line.startswith('{"udp"')]


def out_datagrams(container: object) -> int:
    """The namespace's UDP `OutDatagrams` (IPv4) plus `Udp6OutDatagrams`, from the kernel."""
    snmp = container.exec_run(["cat", "/proc/net/snmp", "/proc/net/snmp6"]).output.decode()  # type: ignore[attr-defined]
    lines = snmp.splitlines()
    udp = [line.split() for line in lines if line.startswith("Udp:")]
    total = int(udp[1][udp[0].index("OutDatagrams")])
    total += sum(int(line.split()[1]) for line in lines if line.startswith("Udp6OutDatagrams"))
    return total


def test_no_udp_leaves_lemonade_through_start_load_chat_and_embeddings() -> None:
    client = docker.from_env()
    tag = new_tag("lemonade-quiet")
    labels = {RUN_LABEL: tag}
    try:
        network = client.networks.create(f"tbx-{tag}-net", internal=True, labels=labels)
        holder = client.containers.run(
            LLM_CPU_IMAGE, entrypoint=["python", "-c", CAPTURE], name=f"tbx-{tag}-capture",
            detach=True, network=network.name, labels=labels, user="0", cap_drop=["ALL"],
            cap_add=["NET_RAW"])
        deadline = time.monotonic() + 30
        while b"capturing" not in holder.logs():
            assert time.monotonic() < deadline, holder.logs().decode(errors="replace")
            time.sleep(0.1)
        holder.reload()
        address = holder.attrs["NetworkSettings"]["Networks"][network.name]["IPAddress"]
        # Lemonade in the holder's namespace, bound to its address, as in the stack.
        server = start_lemonade(f"tbx-{tag}-lemonade", labels, network.name, client=client,
                                network_mode=f"container:{holder.id}",
                                environment={"LEMONADE_HOST": address})
        api = f"{server.url}/api/v1"
        # start-up (both models loaded) is behind us; now a load, a chat and embeddings.
        unloaded = httpx.post(f"{api}/unload", json={"model_name": "embeddinggemma-300m-GGUF"}, timeout=60)
        assert unloaded.status_code == 200, unloaded.text
        assert httpx.post(f"{api}/load", json={"model_name": "embeddinggemma-300m-GGUF"},
                          timeout=120).status_code == 200
        chat = httpx.post(f"{api}/chat/completions", timeout=60, json={
            "model": "Gemma-4-E4B-it-GGUF", "max_tokens": 8,
            "messages": [{"role": "user", "content": "Hello"}]})
        assert chat.status_code == 200, chat.text
        embedded = httpx.post(f"{api}/embeddings", timeout=60, json={
            "model": "user.embeddinggemma-300m-GGUF", "input": ["one", "two"]})
        assert embedded.status_code == 200, embedded.text
        time.sleep(2)  # a beacon timer would have fired by now (Lemonade's interval is ~1 s)
        assert udp_seen(holder) == [], udp_seen(holder)
        assert out_datagrams(server.container) == 0
        # The capture can fail: a planted datagram to this test network's broadcast address.
        network.reload()
        subnet = network.attrs["IPAM"]["Config"][0]["Subnet"]
        broadcast = str(ipaddress.ip_network(subnet).broadcast_address)
        planted = client.containers.run(
            LLM_CPU_IMAGE, entrypoint=["python", "-c", PLANT], command=[broadcast], remove=True,
            network_mode=f"container:{holder.id}", labels=labels)
        assert planted == b""
        deadline = time.monotonic() + 10
        while not udp_seen(holder):
            assert time.monotonic() < deadline, "the capture missed a planted datagram"
            time.sleep(0.1)
        assert udp_seen(holder) == [{"udp": "eth0", "to": broadcast, "port": 9}]
        assert out_datagrams(server.container) == 1
    finally:
        sweep_label(tag)
        client.close()
