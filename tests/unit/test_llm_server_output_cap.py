"""The output cap of the CPU server: the lower of the server's cap and the request's own limit."""

from trialbox_llm.routes import cap_output


def test_no_cap_leaves_the_request_alone() -> None:
    body = {"messages": [], "max_tokens": 4096}
    assert cap_output(dict(body), None) == body


def test_a_request_without_a_limit_gets_the_cap() -> None:
    assert cap_output({"messages": []}, 512)["max_tokens"] == 512


def test_a_higher_request_limit_is_lowered_to_the_cap() -> None:
    body = cap_output({"max_completion_tokens": 8192, "n_predict": 9000}, 512)
    assert body == {"max_tokens": 512}


def test_a_lower_request_limit_wins() -> None:
    assert cap_output({"max_tokens": 64}, 512)["max_tokens"] == 64
