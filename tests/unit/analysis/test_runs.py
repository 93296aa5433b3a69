import json
import math
import tempfile
import unittest
from pathlib import Path

import helpers
from chimera_analysis import AnalysisError
from chimera_analysis.runs import collect_study, read_csv, read_descriptor, write_csv


class CollectTest(unittest.TestCase):
    def test_weak_sample(self):
        rows = collect_study(helpers.SAMPLES / "weak")
        by_name = {r["name"]: r for r in rows}
        self.assertEqual(len(rows), 11)
        self.assertEqual(by_name["weak-chimera-direct-P32-W8-D4-N4-B1"]["status"], "pending")
        failed = by_name["weak-gpipe-P32-W8-D4-N4-B1"]  # its log is NAME.JOBID.out
        self.assertEqual(failed["status"], "failed")
        self.assertTrue(failed["error"].startswith("[rank 0] error: data.train is empty"))
        self.assertEqual(by_name["weak-1f1b-P8-W2-D4-N4-B1"]["steps"], 4)  # cut-off line skipped
        ok = by_name["weak-chimera-direct-P16-W4-D4-N4-B1"]
        self.assertEqual(ok["status"], "ok")
        self.assertEqual(ok["global_batch"], 4 * 4 * 1)
        self.assertAlmostEqual(ok["samples_per_s"], ok["tokens_per_s"] / ok["seq_len"])
        # Sorted by scheme, then nodes.
        self.assertEqual([r["nodes"] for r in rows if r["scheme"] == "gpipe"], [4, 8, 16, 32])

    def test_csv_round_trip(self):
        rows = collect_study(helpers.SAMPLES / "strong")
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "strong.csv"
            write_csv(rows, path)
            back = read_csv(path)
        self.assertEqual(len(back), len(rows))
        for a, b in zip(rows, back):
            self.assertEqual(a["name"], b["name"])
            self.assertEqual(a["nodes"], b["nodes"])
            self.assertAlmostEqual(a["iter_ms"], b["iter_ms"], places=3)

    def test_descriptor_errors_name_the_field(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "x.run.json"
            good = json.loads(next((helpers.SAMPLES / "weak").glob("*.run.json")).read_text())
            path.write_text(json.dumps(dict(good, name="x", D="four")))
            with self.assertRaisesRegex(AnalysisError, "'D' is 'four', expected an integer"):
                read_descriptor(path)
            path.write_text(json.dumps(dict(good, name="y")))
            with self.assertRaisesRegex(AnalysisError, "does not match the file name"):
                read_descriptor(path)
            path.write_text(json.dumps(dict(good, name="x", W=0)))
            with self.assertRaisesRegex(AnalysisError, "'W' is 0, expected >= 1"):
                read_descriptor(path)

    def test_empty_folder_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(AnalysisError, "no run descriptors"):
                collect_study(d)

    def test_csv_without_columns_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "t.csv"
            path.write_text("a,b\n1,2\n")
            with self.assertRaisesRegex(AnalysisError, "missing column"):
                read_csv(path)

    def test_unfinished_values_are_nan(self):
        rows = collect_study(helpers.SAMPLES / "weak")
        pending = next(r for r in rows if r["status"] == "pending")
        self.assertTrue(math.isnan(pending["iter_ms"]))


if __name__ == "__main__":
    unittest.main()
