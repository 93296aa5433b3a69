import contextlib
import io
import tempfile
import unittest
from pathlib import Path

import helpers
import collect
import plot
from chimera_analysis import AnalysisError, plots
from chimera_analysis.runs import collect_study

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class PlotTest(unittest.TestCase):
    """Every plot is produced from the committed samples through the command line."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.out = Path(self.dir.name)
        # The command lines print what they wrote; keep the test log to failures.
        self.quiet = contextlib.redirect_stdout(io.StringIO())
        self.quiet.__enter__()

    def tearDown(self):
        self.quiet.__exit__(None, None, None)
        self.dir.cleanup()

    def assert_png(self, path):
        data = Path(path).read_bytes()
        self.assertEqual(data[:8], PNG_MAGIC)
        self.assertGreater(len(data), 10_000)

    def collect(self, study):
        self.assertEqual(collect.main([str(helpers.SAMPLES / study), "--out-dir",
                                       str(self.out)]), 0)
        return self.out / f"{study}.csv"

    def test_scaling(self):
        for study in ("weak", "strong"):
            png = self.out / f"{study}.png"
            self.assertEqual(plot.main(["scaling", str(self.collect(study)), "-o", str(png)]), 0)
            self.assert_png(png)

    def test_bubble(self):
        png = self.out / "bubble.png"
        self.assertEqual(plot.main(["bubble", str(self.collect("bubble")), "-o", str(png)]), 0)
        self.assert_png(png)

    def test_gantt(self):
        png = self.out / "gantt.png"
        for name in ("chimera_d4n4.json", "chimera_d4n4_emulated.json"):
            trace = helpers.SAMPLES / "traces" / name
            self.assertEqual(plot.main(["gantt", str(trace), "-o", str(png), "--step", "0"]), 0)
            self.assert_png(png)
        self.assertEqual(plot.main(["gantt", str(trace), "-o", str(png), "--step", "9"]), 2)

    def test_memory(self):
        png = self.out / "memory.png"
        traces = helpers.SAMPLES / "traces"
        self.assertEqual(plot.main(["memory", "--trace", f"chimera={traces / 'chimera_d4n4.json'}",
                                    "--trace", f"gpipe={traces / 'gpipe_d4n4.json'}",
                                    "--trace", f"1f1b={traces / '1f1b_d4n4_emulated.json'}",
                                    "--act-mib", "1.5", "-o", str(png)]), 0)
        self.assert_png(png)

    def test_best_configuration_and_efficiency(self):
        rows = collect_study(helpers.SAMPLES / "weak")
        best = plots.best_per_nodes(rows)
        self.assertEqual(sorted(best), ["1f1b", "chimera", "gpipe"])
        self.assertEqual(sorted(best["chimera"]), [4, 8, 16])  # the pending 32-node run is out
        eff = plots.parallel_efficiency(best["chimera"])
        self.assertEqual(eff[4], 1.0)
        thr = {n: best["chimera"][n]["samples_per_s"] for n in (4, 16)}
        self.assertAlmostEqual(eff[16], thr[16] / thr[4] / 4)

    def test_nothing_to_plot_is_an_error(self):
        rows = [r for r in collect_study(helpers.SAMPLES / "weak") if r["status"] != "ok"]
        with self.assertRaisesRegex(AnalysisError, "no completed runs"):
            plots.plot_scaling(rows, self.out / "x.png")
        self.assertFalse((self.out / "x.png").exists())


if __name__ == "__main__":
    unittest.main()
