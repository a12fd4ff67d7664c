"""The server's output in bounded memory: records cut at journald's LineMax, the records of
one poll and the diagnostics' tail bounded in records and bytes."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.services import log_filter, log_pump

KEY = "sk-flood-key-0123456789"


def feed_in_chunks(splitter, data, chunk=65536):
    out, most_pending = [], 0
    for i in range(0, len(data), chunk):
        out.extend(splitter.feed(data[i:i + chunk]))
        most_pending = max(most_pending, len(splitter.pending))
    return out + splitter.close(), most_pending


def test_a_line_that_never_ends_is_cut_into_journald_sized_records_and_the_splitter_stays_small():
    line = ("é" * 600_000).encode()     # 1.2 MB, two bytes per character: cuts must fall between them
    records, most_pending = feed_in_chunks(log_filter.LineSplitter(log_filter.blanker(None)), line)
    assert most_pending <= log_filter.LINE_MAX_BYTES + 65536
    assert all(len(r) <= log_filter.LINE_MAX_BYTES for r, dummy_cut in records)
    assert [cut for dummy_r, cut in records] == [True] * (len(records) - 1) + [False]
    assert b"".join(r for r, dummy_cut in records) == line
    assert all(r.decode("utf-8") for r, dummy_cut in records)     # no character split by a cut


def test_a_cut_never_splits_the_key_so_it_is_blanked_on_both_sides_of_a_cut():
    for offset in range(-len(KEY) - 2, 3):
        at = log_filter.LINE_MAX_BYTES + offset
        line = b"x" * at + KEY.encode() + b"y" * 70000 + b"\n"
        records, dummy_most = feed_in_chunks(log_filter.LineSplitter(log_filter.blanker(KEY)), line, chunk=4096)
        text = b"\n".join(r for r, dummy_cut in records)
        assert KEY.encode() not in text and b"sk-flood" not in text and text.count(log_filter.MARK) == 1, offset
        assert all(len(r) <= log_filter.LINE_MAX_BYTES for r, dummy_cut in records)


def test_short_lines_pass_whole_and_unmarked():
    splitter = log_filter.LineSplitter(log_filter.blanker(KEY))
    assert splitter.feed(b"one\rtwo " + KEY.encode() + b"\nthr") == [(b"one", False), (b"two <api-key>", False)]
    assert splitter.close() == [(b"thr", False)]


def test_the_records_of_one_poll_keep_the_first_and_the_newest_and_count_the_dropped():
    records = log_pump.PollRecords(max_records=100, max_bytes=10_000)
    for i in range(10_000):
        records.add({"msg": "line %d" % i}, 60)
    kept, dropped = records.take()
    assert dropped == 10_000 - len(kept) and len(kept) <= 100 and sum(60 for dummy in kept) <= 10_000
    numbers = [int(r["msg"].split()[1]) for r in kept]
    assert numbers[0] == 0 and numbers[-1] == 9_999 and numbers == sorted(numbers)
    assert records.take() == ([], 0)        # the next poll starts empty


def test_the_tail_for_the_diagnostics_is_bounded_in_bytes_not_only_in_lines():
    tail = log_pump.RecentRecords(max_records=400, max_bytes=256 * 1024)
    for i in range(50):
        tail.add("%d" % i + "x" * 48 * 1024, 48 * 1024)
    assert tail.bytes <= 256 * 1024 and len(tail.values()) == 5 and tail.values()[-1].startswith("49x")
