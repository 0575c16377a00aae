"""``bot.core.lru.Lru``: the bounded map behind the watch's and the client's caches."""

from __future__ import annotations

import threading

from bot.core.lru import Lru


def test_the_least_recently_used_entry_goes_first_when_the_count_is_passed() -> None:
    kept: Lru[str, int] = Lru(2)
    kept.put("a", 1)
    kept.put("b", 2)
    assert kept.get("a") == 1  # now the most recently used
    kept.put("c", 3)

    assert (kept.peek("a"), kept.peek("b"), kept.peek("c")) == (1, None, 3)
    assert len(kept) == 2


def test_peek_leaves_the_order_as_it_is() -> None:
    kept: Lru[str, int] = Lru(2)
    kept.put("a", 1)
    kept.put("b", 2)
    assert kept.peek("a") == 1
    kept.put("c", 3)

    assert kept.peek("a") is None and kept.peek("b") == 2


def test_the_summed_weight_is_bounded_and_a_replaced_value_no_longer_weighs() -> None:
    texts = ["x" * 40, "y" * 40, "z" * 30]
    kept: Lru[int, str] = Lru(10, max_weight=100, weight=len)
    kept.put(0, texts[0])
    kept.put(0, texts[0])  # replaced: still 40, not 80
    kept.put(1, texts[1])
    assert len(kept) == 2  # 80 of 100

    kept.put(2, texts[2])  # 110: the oldest goes

    assert [kept.peek(i) for i in range(3)] == [None, texts[1], texts[2]]


def test_a_value_heavier_than_the_bound_alone_is_not_kept() -> None:
    kept: Lru[str, str] = Lru(10, max_weight=5, weight=len)
    kept.put("small", "abc")
    kept.put("big", "abcdefgh")

    assert len(kept) == 0 and kept.get("big") is None


def test_threads_putting_at_once_keep_the_bounds() -> None:
    kept: Lru[int, int] = Lru(50, max_weight=500, weight=lambda v: v % 20)

    def fill(start: int) -> None:
        for i in range(start, start + 2000):
            kept.put(i, i)
            kept.get(i - 1)

    threads = [threading.Thread(target=fill, args=(n * 2000,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    values = [v for k in range(8000) if (v := kept.peek(k)) is not None]
    assert len(values) == len(kept) <= 50
    assert sum(v % 20 for v in values) <= 500
