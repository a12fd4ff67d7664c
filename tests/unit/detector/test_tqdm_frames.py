from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import tqdm_frames

BLOB = "".join("\rLoading safetensors checkpoint shards: %3d%% Completed | %d/64 [00:00<00:40,  1.60it/s]" % (n * 100 // 64, n)
               for n in range(65))


def test_blob_record_last_frame_is_the_final_state():
    progress = tqdm_frames.last_bar(BLOB)
    assert (progress.desc, progress.n, progress.total, progress.done) == ("Loading safetensors checkpoint shards", 64, 64, True)


def test_a_cut_blob_reports_the_last_complete_frame():
    cut = BLOB[: BLOB.index("30/64") + 10]
    progress = tqdm_frames.last_bar(cut)
    assert progress.n == 30 and not progress.done


def test_blob_frames_are_split_on_carriage_returns():
    assert len(tqdm_frames.frames(BLOB)) == 65


def test_single_frame_records_of_both_bar_styles_parse():
    sgl = tqdm_frames.parse_frame("[2026-11-29 10:00:00 TP0] Multi-thread loading shards:  45% Completed | 29/64 [01:00<01:10]")
    tq = tqdm_frames.parse_frame("Capturing batches (bs=1 avail_mem=8.10 GB): 100%|##########| 36/36 [01:30<00:00,  0.40it/s]")
    assert (sgl.desc, sgl.n, sgl.total) == ("Multi-thread loading shards", 29, 64)
    assert tq.desc.startswith("Capturing batches") and tq.done


def test_unit_scaled_counters_are_expanded():
    progress = tqdm_frames.parse_frame("model.safetensors:  40%|####      | 1.2G/3.0G [00:10<00:15, 120MB/s]")
    assert progress.n == 1.2e9 and progress.total == 3.0e9


def test_plain_log_lines_are_not_bars():
    assert tqdm_frames.last_bar("[2026-11-29 10:00:00 TP0] Load weight end. avail mem=19.83 GB, mem usage=74.69 GB.") is None
    assert tqdm_frames.last_bar("token usage: 0.00, 50% of budget") is None
