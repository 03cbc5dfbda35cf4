"""cluster serve's access checks answer the same for a Host header however often and after however many other
Host headers it was sent (it remembers how it read the ones clients send, a bounded number)."""

from __future__ import annotations

from taskplug.localcluster._access import AccessPolicy

TOKEN = "the-token"


def _status(policy: AccessPolicy, host: str, *, token: str = TOKEN) -> int:
    refused = policy.check("api", {"Host": host, "Authorization": f"Bearer {token}"})
    return 200 if refused is None else refused.status


def test_each_host_gets_the_same_answer_every_time() -> None:
    policy = AccessPolicy(TOKEN, bound_host="127.0.0.1")
    for _ in range(3):
        assert _status(policy, "127.0.0.1:6443") == 200
        assert _status(policy, "localhost:6443") == 200
        assert _status(policy, "0x7f.0.0.1:6443") == 200  # a browser's spelling of the loopback address
        assert _status(policy, "attacker.example:6443") == 403
        assert _status(policy, "127.0.0.1.attacker.example") == 403
        assert _status(policy, "127.0.0.1:6443", token="wrong") == 401  # a known Host still needs the token


def test_a_flood_of_hosts_changes_no_answer() -> None:
    policy = AccessPolicy(TOKEN, bound_host="127.0.0.1")
    assert all(_status(policy, f"rebound-{i}.example:6443") == 403 for i in range(1000))
    assert _status(policy, "127.1:6443") == 200  # read afresh once the remembered ones are many
    assert _status(policy, "[::1]:6443") == 200
    assert _status(policy, "attacker.example:6443") == 403
