"""analysis/measure_costs.py against a stand-in `chimera bench model` with known costs."""
import os
import subprocess
import tempfile
import tomllib
import unittest
from pathlib import Path

import helpers

FAKE = Path(__file__).resolve().parent / "fake_bench_model"
CONFIG = helpers.SOURCE_DIR / "jobscripts/configs/local.toml"


def measure(output: Path, **env):
    return subprocess.run(["/usr/bin/python3", str(helpers.ANALYSIS_DIR / "measure_costs.py"),
                           "--config", str(CONFIG), "--bin", str(FAKE), "-o", str(output)],
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, **env))


class MeasureCostsTest(unittest.TestCase):
    def test_separates_block_from_fixed_stage_cost(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "costs.toml"
            result = measure(out)
            self.assertEqual(result.returncode, 0, result.stderr)
            costs = tomllib.loads(out.read_text())
        self.assertAlmostEqual(costs["block"]["forward_ms"], 2.0)
        self.assertAlmostEqual(costs["block"]["backward_ms"], 4.0)
        self.assertAlmostEqual(costs["scaling"]["stage_overhead_ms"], (0.5 + 1.5) / 2)
        self.assertAlmostEqual(costs["embedding"]["forward_ms"], 0.3)
        self.assertAlmostEqual(costs["embedding"]["backward_ms"], 0.6)
        self.assertAlmostEqual(costs["head"]["forward_ms"], 4.0)
        self.assertAlmostEqual(costs["head"]["backward_ms"], 8.0)
        # 0.5 ms per MB of fp32 parameters: 2 ns per parameter
        self.assertAlmostEqual(costs["scaling"]["optimizer_ns_per_param"], 2.0)

    def test_refuses_timings_that_do_not_grow_with_the_blocks(self):
        with tempfile.TemporaryDirectory() as tmp:
            result = measure(Path(tmp) / "costs.toml", FAKE_BENCH_FLAT="1")
        self.assertEqual(result.returncode, 1)
        self.assertIn("noise", result.stderr)


if __name__ == "__main__":
    unittest.main()
