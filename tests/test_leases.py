"""The rule that decides which node pays a request claimed by several (hf_judge/store/leases.py), step by step, with
an injected clock and an object store in memory (fsspec's): no thread, no wall-clock sleep. Each node reads the
world's time through its own clock (``offset``: its skew), and a put may take time, or let another node act while
it is on its way (``during_put``): the interleavings that matter are made, not hoped for."""

from __future__ import annotations

import uuid

import fsspec
import pytest

from hf_judge.store.leases import ASKING, LOST, REFRESH_S, RemoteClaims, sweep

LEASE, PUT, SKEW = 30.0, 0.5, 0.5
KEYS = [bytes([i]) * 16 for i in range(8)]


class World:
    """The one true time, in seconds."""

    def __init__(self) -> None:
        self.t = 1_700_000_000.0

    def advance(self, s: float) -> None:
        self.t += s


class NodeClock:
    """A node's clock: the world's time, ``offset`` seconds off (its monotonic clock runs with the world's)."""

    def __init__(self, world: World, offset: float = 0.0) -> None:
        self.world, self.offset = world, offset

    def time(self) -> float:
        return self.world.t + self.offset

    def monotonic(self) -> float:
        return self.world.t


class NodeFs:
    """The shared in-memory store as one node reaches it: a put takes ``put_time`` of the world's time, and
    ``during_put`` (another node's turn) runs while it is on its way, before the object lands."""

    def __init__(self, fs, world: World) -> None:
        self.fs, self.world = fs, world
        self.put_time = 0.0
        self.during_put = None

    def pipe_file(self, path: str, data: bytes) -> None:
        self.world.advance(self.put_time)
        if self.during_put is not None:
            act, self.during_put = self.during_put, None
            act()
        self.fs.pipe_file(path, data)

    def __getattr__(self, name):
        return getattr(self.fs, name)


@pytest.fixture
def world():
    return World()


@pytest.fixture
def root():
    return f"/claims-test-{uuid.uuid4().hex[:8]}/claims"


def node(world: World, root: str, owner: str, offset: float = 0.0, pulls: list | None = None) -> RemoteClaims:
    fs = NodeFs(fsspec.filesystem("memory"), world)
    pull = (lambda: pulls.append(owner)) if pulls is not None else None
    return RemoteClaims(
        fs, root, owner=owner, lease_s=LEASE, put_s=PUT, clock_skew_s=SKEW, pull=pull, clock=NodeClock(world, offset)
    )


def settle(*nodes: RemoteClaims, seconds: float = 0.0, world: World) -> None:
    """Let ``seconds`` of the world's time pass, then give each node a turn (in order)."""
    world.advance(seconds)
    for n in nodes:
        n.step()


def test_a_claim_is_decided_only_once_every_earlier_claim_must_be_visible(world, root):
    a = node(world, root, "a")
    assert a.take(KEYS) == []  # queued for a claim
    settle(a, world=world)  # the claim is put
    assert a.take(KEYS) == [] and set(a.state.values()) == {ASKING}
    settle(a, seconds=PUT + SKEW - 0.01, world=world)
    assert a.take(KEYS) == []  # an earlier claim on its way may still land
    settle(a, seconds=0.02, world=world)
    assert a.take(KEYS) == KEYS


def test_two_nodes_claiming_the_same_keys_at_the_same_moment_pay_each_once(world, root):
    a, b = node(world, root, "node-a"), node(world, root, "node-b")
    a.take(KEYS)
    b.take(KEYS)
    settle(a, b, world=world)  # both claims named in the same millisecond
    assert a.mine and b.mine and next(iter(a.mine.values())).id.t_ms == next(iter(b.mine.values())).id.t_ms
    settle(a, b, seconds=PUT + SKEW + 0.01, world=world)
    assert a.take(KEYS) == KEYS  # the tie goes to the first owner by name, on both nodes alike
    assert b.take(KEYS) == [] and set(b.state.values()) == {LOST}


def test_a_claim_named_earlier_that_lands_after_another_decided_is_withdrawn(world, root):
    """The race a listing rule alone loses: b names its claim first, but its put is slow; meanwhile a claims the
    same keys, waits, lists (b's claim is not there yet) and pays. b's put took longer than ``put_s``, so b
    withdraws its claim and claims again, later than a's: b pays nothing."""
    a, b = node(world, root, "a"), node(world, root, "b")
    b.take(KEYS)
    a.take(KEYS)

    def a_claims_and_decides() -> None:
        a.step()
        world.advance(PUT + SKEW + 0.01)
        a.step()

    b.fs.put_time, b.fs.during_put = 0.05, a_claims_and_decides
    b.step()  # b named its claim first; a decided while it was on its way
    assert a.take(KEYS) == KEYS
    assert b.take(KEYS) == [] and not b.mine  # withdrawn, queued again
    for _ in range(3):
        settle(a, b, seconds=PUT + SKEW, world=world)
    assert b.take(KEYS) == [] and set(b.state.values()) == {LOST}
    assert a.take(KEYS) == KEYS


def test_clocks_apart_by_less_than_the_skew_allowed_still_let_one_node_pay(world, root):
    """b's clock is 0.4 s behind: its claim, made after a's, carries an earlier time. a sees it when it decides
    (it landed within the put time), so a waits and b pays."""
    a, b = node(world, root, "a"), node(world, root, "b", offset=-0.4)
    a.take(KEYS)
    settle(a, world=world)
    world.advance(0.3)
    b.take(KEYS)
    settle(b, world=world)
    for _ in range(3):
        settle(a, b, seconds=0.5, world=world)
    assert (len(a.take(KEYS)), len(b.take(KEYS))) == (0, len(KEYS))


def test_a_live_node_renews_its_lease_and_a_dead_nodes_claims_free_themselves(world, root):
    pulls: list[str] = []
    a, b = node(world, root, "a", pulls=pulls), node(world, root, "b", pulls=pulls)
    a.take(KEYS)
    settle(a, world=world)
    settle(a, seconds=PUT + SKEW + 0.01, world=world)
    assert a.take(KEYS) == KEYS  # a sends them: a long request
    b.take(KEYS)
    for _ in range(int(3 * LEASE / REFRESH_S)):  # three leases long, a renewing its lease as it goes
        settle(a, b, seconds=REFRESH_S, world=world)
    assert b.take(KEYS) == [] and a.lease_object is not None
    pulls.clear()
    until = a.lease_until  # a is killed: no more turns, no renewal
    assert until - world.t >= LEASE * 2 / 3  # renewed before a third of its lease was left
    while world.t + REFRESH_S < until:
        settle(b, seconds=REFRESH_S, world=world)
        assert b.take(KEYS) == []
    settle(b, seconds=2 * REFRESH_S, world=world)
    assert b.take(KEYS) == KEYS  # a's lease ended: b's own claim is the first live one
    assert pulls == ["b"]  # b read the segments a published before it was given the keys
    left = fsspec.filesystem("memory").ls(root, detail=False)
    assert any("-a-" in p or p.endswith(a.lease_object) for p in left)
    world.advance(LEASE + REFRESH_S)  # a lease after a's ended, whoever lists the claims sweeps its objects
    b.take([b"\xff" * 16])
    settle(b, world=world)
    settle(b, seconds=PUT + SKEW + 0.01, world=world)
    left = [p.rsplit("/", 1)[-1] for p in fsspec.filesystem("memory").ls(root, detail=False)]
    assert left and all("-b-" in n or n.startswith("l-b-") for n in left)


def test_a_claim_ends_once_its_replies_are_published_and_the_waiting_node_reads_them_first(world, root):
    pulls: list[str] = []
    a, b = node(world, root, "a", pulls=pulls), node(world, root, "b", pulls=pulls)
    a.take(KEYS)
    b.take(KEYS)
    settle(a, world=world)
    settle(b, seconds=0.01, world=world)
    settle(a, b, seconds=PUT + SKEW, world=world)
    assert a.take(KEYS) == KEYS and b.take(KEYS) == []
    for i, k in enumerate(KEYS):
        a.settle(k, ticket=i + 1)  # answered: its reply is the i+1-th row a queued for a segment
    settle(a, b, seconds=REFRESH_S, world=world)
    assert len(a.mine) == 1  # not published yet: the claim holds
    a.published_through(len(KEYS) - 1)
    settle(a, world=world)
    assert len(a.mine) == 1  # one reply still unpublished
    a.published_through(len(KEYS))
    pulls.clear()
    settle(a, world=world)
    assert not a.mine  # every reply published: the claim is deleted
    settle(b, seconds=REFRESH_S, world=world)
    assert pulls == ["b"] and b.take(KEYS) == KEYS  # read the segments, then (what it still lacks) it sends


def test_the_pipeline_is_told_which_keys_were_given_since_it_last_asked(world, root):
    a = node(world, root, "a")
    a.take(KEYS[:4])
    settle(a, world=world)
    v0 = a.version
    settle(a, seconds=PUT + SKEW + 0.01, world=world)
    assert sorted(a.won_since(v0)) == KEYS[:4] and a.won_since(a.version) == []
    a.take(KEYS[4:])
    settle(a, world=world)
    v1 = a.version
    settle(a, seconds=PUT + SKEW + 0.01, world=world)
    assert sorted(a.won_since(v1)) == KEYS[4:] and sorted(a.won_since(v0)) == KEYS


def test_a_store_that_refuses_claims_lets_the_run_send_unclaimed(world, root, caplog):
    class ReadOnly(NodeFs):
        def pipe_file(self, path: str, data: bytes) -> None:
            raise PermissionError("Access Denied")

    a = RemoteClaims(ReadOnly(fsspec.filesystem("memory"), world), root, owner="a", clock=NodeClock(world))
    assert a.take(KEYS) == []
    a.step()
    assert a.take(KEYS) == KEYS and "sends them unclaimed" in caplog.text


def test_compact_sweeps_claims_whose_owner_is_gone(world, root):
    fs = fsspec.filesystem("memory")
    a = node(world, root, "a")
    a.take(KEYS)
    settle(a, world=world)
    assert sweep(fs, root, now=world.t + LEASE, lease_s=LEASE) == 0  # its lease is running (or just ended)
    assert sweep(fs, root, now=world.t + 2 * LEASE + 1, lease_s=LEASE) == 1
    assert sweep(fs, root, now=world.t + 2 * LEASE + 1, lease_s=LEASE) == 0


def test_a_node_that_waits_for_another_says_so_once_with_the_lease(world, root, caplog):
    """What a user sees while the rows wait: one warning naming the other run and how soon a stopped run's claims
    free themselves, not one per key or per listing."""
    a, b = node(world, root, "node-a"), node(world, root, "node-b")
    a.take(KEYS)
    settle(a, world=world)
    b.take(KEYS)
    settle(b, seconds=0.01, world=world)
    for _ in range(3):
        settle(a, b, seconds=REFRESH_S, world=world)
    assert b.take(KEYS) == []
    said = [r for r in caplog.records if "node-a" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "WARNING"
    assert "waits for its replies" in said[0].getMessage() and f"within {LEASE:.0f} s" in said[0].getMessage()


def test_a_store_in_a_local_folder_url_claims_too(tmp_path):
    """``cache_dir="file:///shared/folder"`` (a folder every node mounts): the claims folder is made before the
    first claim is put there (a put into a missing folder failed, and the keys went unclaimed 10 s later)."""
    import time

    from hf_judge.store.replies import ReplyStore
    from hf_judge.store.segments import Remote

    store = ReplyStore(tmp_path / "local" / "replies.sqlite3", remote=Remote.of((tmp_path / "shared").as_uri()))
    try:
        key = b"\x07" * 16
        deadline = time.monotonic() + 8  # the claim is decided ~1 s after it is put (put_s + clock skew)
        mine: list[bytes] = []
        while not mine and time.monotonic() < deadline:
            found, mine = store.claim([key])
            time.sleep(0.05)
        assert mine == [key]
        assert [p.name[:2] for p in (tmp_path / "shared" / "claims").iterdir()] == ["c-"]
    finally:
        store.close()
