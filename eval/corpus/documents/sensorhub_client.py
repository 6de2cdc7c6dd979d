"""Client for the SensorHub REST API, version 3 (Vellacourt Instruments, fictional).

SensorHub collects readings from Glimmerstat and Tessaline instruments. This module is the
reference client: every public function maps to one endpoint.

Authentication: send your API key in the ``X-Vella-Key`` request header. Keys are issued in
the SensorHub admin console and expire after 180 days.

Rate limit: 120 requests per minute per API key. Over the limit the server answers
HTTP 429 with a ``Retry-After`` header giving the seconds to wait.
"""

import json
import urllib.request

BASE_URL = "https://sensorhub.vellacourt.example/api/v3"
DEFAULT_TIMEOUT_SECONDS = 15
MAX_PAGE_SIZE = 250  # the server rejects larger pages with HTTP 400


def _get(path, api_key, params=None, timeout=DEFAULT_TIMEOUT_SECONDS):
    """GET ``path`` with the key header; return the decoded JSON body."""
    query = "&".join(f"{k}={v}" for k, v in (params or {}).items())
    url = f"{BASE_URL}{path}" + (f"?{query}" if query else "")
    request = urllib.request.Request(url, headers={"X-Vella-Key": api_key})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.load(response)


def list_devices(api_key):
    """GET /devices: every instrument registered to the account."""
    return _get("/devices", api_key)


def get_readings(api_key, device_id, since, page_size=100):
    """GET /devices/{device_id}/readings: readings newer than ``since`` (ISO 8601).

    ``page_size`` defaults to 100 and may be at most 250 (MAX_PAGE_SIZE). Follow the
    ``next_cursor`` field of the response to fetch the following page.
    """
    if page_size > MAX_PAGE_SIZE:
        raise ValueError("page_size may be at most 250")
    params = {"since": since, "page_size": page_size}
    return _get(f"/devices/{device_id}/readings", api_key, params)


def acknowledge_alert(api_key, alert_id):
    """POST /alerts/{alert_id}/ack: mark an alert as seen. Returns HTTP 204 on success."""
    url = f"{BASE_URL}/alerts/{alert_id}/ack"
    request = urllib.request.Request(url, method="POST", headers={"X-Vella-Key": api_key})
    with urllib.request.urlopen(request, timeout=DEFAULT_TIMEOUT_SECONDS) as response:
        return response.status
