import json
import math
import tempfile
import unittest
from pathlib import Path

import helpers
from chimera_analysis import AnalysisError
from chimera_analysis.metrics import read_metrics, summarize

LINE = {"step": 1, "loss": 10.9, "lr": 6e-4, "grad_norm": 1.5, "iter_ms": 20.0,
        "tokens_per_s": 1000.0, "bubble_ratio": 0.25, "peak_act_bytes": 4096}


class MetricsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name) / "m.jsonl"

    def tearDown(self):
        self.dir.cleanup()

    def write(self, *lines):
        self.path.write_text("".join(line + "\n" for line in lines))

    def test_reads_sample_and_skips_truncated_last_line(self):
        path = helpers.SAMPLES / "weak" / "weak-1f1b-P8-W2-D4-N4-B1.metrics.jsonl"
        records = read_metrics(path)
        self.assertEqual([r["step"] for r in records], [0, 1, 2, 3])
        self.assertIsInstance(records[0]["peak_act_bytes"], int)

    def test_null_becomes_nan_and_val_loss_is_kept(self):
        self.write(json.dumps(dict(LINE, loss=None, val_loss=9.5)))
        (record,) = read_metrics(self.path)
        self.assertTrue(math.isnan(record["loss"]))
        self.assertEqual(record["val_loss"], 9.5)

    def test_missing_field_names_it(self):
        bad = dict(LINE)
        del bad["iter_ms"]
        self.write(json.dumps(bad))
        with self.assertRaisesRegex(AnalysisError, r"m\.jsonl:1: missing field\(s\) iter_ms"):
            read_metrics(self.path)

    def test_malformed_middle_line_is_an_error(self):
        self.write(json.dumps(LINE), "{not json}", json.dumps(dict(LINE, step=2)))
        with self.assertRaisesRegex(AnalysisError, r"m\.jsonl:2: not a JSON object"):
            read_metrics(self.path)

    def test_wrong_type_is_an_error(self):
        self.write(json.dumps(dict(LINE, iter_ms="fast")))
        with self.assertRaisesRegex(AnalysisError, "'iter_ms' is 'fast', expected a number"):
            read_metrics(self.path)

    def test_missing_file(self):
        with self.assertRaisesRegex(AnalysisError, "cannot read metrics file"):
            read_metrics(Path(self.dir.name) / "absent.jsonl")

    def test_summary_leaves_out_warmup_and_takes_medians(self):
        records = [dict(LINE, step=s, iter_ms=ms, tokens_per_s=1000.0 / ms * 20,
                        peak_act_bytes=100 * s)
                   for s, ms in enumerate([90.0, 20.0, 22.0, 21.0], start=1)]
        records[2]["val_loss"] = 9.0
        s = summarize(records, warmup=1)
        self.assertEqual(s["steps"], 4)
        self.assertEqual(s["iter_ms"], 21.0)
        self.assertAlmostEqual(s["tokens_per_s"], 1000.0 / 21.0 * 20)
        self.assertEqual(s["peak_act_bytes"], 400)
        self.assertEqual(s["val_loss"], 9.0)
        # A run shorter than the warmup still reports its last step.
        self.assertEqual(summarize(records[:1], warmup=3)["iter_ms"], 90.0)


if __name__ == "__main__":
    unittest.main()
