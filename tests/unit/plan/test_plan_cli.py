"""`chimera plan` end to end: predictions as JSON, the search's table, and bad input."""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parents[3]
BIN = os.environ.get("CHIMERA_BIN", str(SOURCE_DIR / "build/release/bin/chimera"))
LOCAL = str(SOURCE_DIR / "jobscripts/configs/local.toml")
GPT2 = str(SOURCE_DIR / "jobscripts/configs/gpt2-1.3b.toml")
P100 = str(SOURCE_DIR / "jobscripts/configs/p100-costs.toml")


def plan(*args):
    return subprocess.run([BIN, "plan", *args], capture_output=True, text=True, timeout=120)


class PredictTest(unittest.TestCase):
    def predict(self, *args):
        result = plan("--model", LOCAL, "--memory", "64", "--format", "json", "--predict", *args)
        self.assertEqual(result.returncode, 0, result.stderr)
        return [json.loads(line) for line in result.stdout.splitlines()]

    def test_design_reference_times(self):
        # Unit costs, a free network: Chimera D=4 N=4 takes 2N + D - 2 = 10, 1F1B 2(N + D - 1).
        rows = self.predict("--cost", "1:1", "--network", "0us,0ns/B", "--schemes",
                            "chimera,1f1b", "-D", "4", "-N", "4")
        self.assertEqual([r["scheme"] for r in rows], ["chimera", "1f1b"])
        self.assertAlmostEqual(rows[0]["iteration_ms"], 10.0)
        self.assertAlmostEqual(rows[0]["bubble_ratio"], 0.2)
        self.assertAlmostEqual(rows[1]["iteration_ms"], 14.0)

    def test_split_backward_takes_the_weight_gradient_share(self):
        # zb-h1 runs I before W; a bigger W share delays less of the critical path.
        small_w, big_w = (self.predict("--cost", cost, "--network", "0us,0ns/B", "--schemes",
                                       "zb-h1", "-D", "4", "-N", "4")[0]["iteration_ms"]
                          for cost in ("1:2:0.2", "1:2:1.8"))
        self.assertLess(big_w, small_w)

    def test_network_costs_time(self):
        free, slow = (self.predict("--cost", "2:4", "--network", net, "-W", "2", "-D", "4",
                                   "-N", "8")[0] for net in ("0us,0ns/B", "50us,1GB/s"))
        self.assertAlmostEqual(free["iteration_ms"], free["work_ms"] + free["bubble_ms"])
        self.assertGreater(slow["p2p_ms"], 0)
        self.assertGreater(slow["allreduce_exposed_ms"], 0)
        self.assertAlmostEqual(slow["iteration_ms"],
                               slow["work_ms"] + slow["bubble_ms"] + slow["p2p_ms"] +
                               slow["allreduce_exposed_ms"] + slow["optimizer_ms"], places=3)

    def test_shard_optimizer_shrinks_the_moments_and_prices_the_gathers(self):
        args = ("--cost", "2:4", "--network", "50us,1GB/s", "-W", "2", "-D", "4", "-N", "8")
        full = self.predict(*args)[0]
        sharded = self.predict(*args, "--shard-optimizer")[0]
        self.assertFalse(full["shard_optimizer"])
        self.assertTrue(sharded["shard_optimizer"])
        self.assertEqual(full["gather_ms"], 0)
        self.assertGreater(sharded["gather_exposed_ms"], 0)
        # Reduce-scatter + all-gather: alone, the allreduce's price (Rabenseifner's two halves),
        # but for the runtime's ring: r - 1 = 3 steps against log2 4 = 2, one alpha (0.05 ms)
        # more for each of the five sums (four stages and the tied table, r = 2 holders x W 2 =
        # 4); more here, where a worker's rings share its links and wait for its block boundaries.
        self.assertGreater(sharded["allreduce_ms"] + sharded["gather_ms"],
                           full["allreduce_ms"] + 5 * 0.05)
        self.assertLess(sharded["peak_memory_bytes"], full["peak_memory_bytes"])
        self.assertAlmostEqual(sharded["iteration_ms"],
                               sharded["work_ms"] + sharded["bubble_ms"] + sharded["p2p_ms"] +
                               sharded["gather_exposed_ms"] + sharded["allreduce_exposed_ms"] +
                               sharded["optimizer_ms"], places=3)

    def test_sharded_table_prices_it_against_the_allreduce(self):
        result = plan("--model", LOCAL, "--memory", "64", "--predict", "--cost", "2:4",
                      "--network", "50us,1GB/s", "-W", "2", "-D", "4", "-N", "8",
                      "--shard-optimizer")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertRegex(result.stdout, r"\+ weight gather waits \d+\.\d\d \+ exposed "
                                        r"reduce-scatter \d+\.\d\d")
        self.assertRegex(result.stdout, r"against full optimizer state: iteration \d+\.\d\d ms "
                                        r"\(allreduce \d+\.\d\d ms")

    def test_memory_csv_feeds_the_memory_plot(self):
        with tempfile.TemporaryDirectory() as d:
            csv_path = Path(d) / "memory.csv"
            self.predict("--cost", "1:2", "--schemes", "chimera,1f1b,gpipe", "-D", "4", "-N", "4",
                         "--memory-csv", str(csv_path))
            lines = csv_path.read_text().splitlines()
            self.assertEqual(len(lines), 1 + 3 * 4)  # header + 3 schemes x 4 workers
            png = Path(d) / "memory.png"
            result = subprocess.run([sys.executable, str(SOURCE_DIR / "analysis/plot.py"),
                                     "memory", "--plan-csv", str(csv_path), "-o", str(png)],
                                    capture_output=True, text=True, timeout=120)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertTrue(png.read_bytes().startswith(b"\x89PNG"))


class SearchTest(unittest.TestCase):
    def test_gpt2_on_piz_daint_prints_ranking_and_reasons(self):
        result = plan("--model", GPT2, "--nodes", "64", "--memory", "16", "--costs", P100,
                      "--network", "10us,8GB/s", "--global-batch", "256", "--top", "5",
                      "--schemes", "chimera,1f1b,gpipe,gems")
        self.assertEqual(result.returncode, 0, result.stderr)
        out = result.stdout
        self.assertIn("1.32 B parameters", out)
        ranks = [int(m.group(1)) for m in re.finditer(r"^ {0,2}(\d+) \S+.* (?:yes|no) ", out, re.M)]
        self.assertEqual(ranks, [1, 2, 3, 4, 5])
        self.assertIn("Best layout of each scheme", out)
        self.assertRegex(out, r"Why \S+ W=\d+ D=\d+ B=\d+ N=\d+")
        self.assertRegex(out, r"x faster than \S+ at its best: mostly ")

    def test_sharded_search_says_so_and_shows_the_gather_waits(self):
        result = plan("--model", GPT2, "--nodes", "64", "--memory", "16", "--costs", P100,
                      "--network", "10us,8GB/s", "--global-batch", "256", "--top", "3",
                      "--schemes", "chimera,1f1b", "--shard-optimizer")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("global batch 256, optimizer state sharded:", result.stdout)
        self.assertRegex(result.stdout, r"Why \S+ W=\d+ D=\d+ B=\d+ N=\d+.* sharded wins")
        self.assertRegex(result.stdout, r"p2p +gather +allreduce")

    def test_nothing_fits(self):
        result = plan("--model", GPT2, "--nodes", "8", "--memory", "2", "--reserve", "0.5",
                      "--costs", P100, "--global-batch", "64")
        self.assertEqual(result.returncode, 1)
        self.assertIn("no layout fits in 2 GiB per device", result.stdout)


class ShardStudyTest(unittest.TestCase):
    def test_sharding_fits_at_least_as_much_as_full_state(self):
        # analysis/paper_comparison.py --shard-study on a smaller machine (W = 8): Chimera D = 8.
        result = subprocess.run(
            ["/usr/bin/python3", str(SOURCE_DIR / "analysis/paper_comparison.py"), "--bin", BIN,
             "--nodes", "64", "--shard-study"], capture_output=True, text=True, timeout=240)
        self.assertEqual(result.returncode, 0, result.stderr)
        rows = [[c.strip() for c in line.strip("|").split("|")]
                for line in result.stdout.splitlines()
                if line.startswith("| micro") or line.startswith("| model")]
        self.assertEqual([(r[0], r[1]) for r in rows],
                         [("micro-batch B", "full"), ("micro-batch B", "sharded"),
                          ("model depth (B = 1)", "full"), ("model depth (B = 1)", "sharded")])
        largest = [int(r[2].split("=")[1]) for r in rows]
        self.assertGreaterEqual(largest[1], largest[0])  # micro-batch
        self.assertGreater(largest[3], largest[2])  # the moments of deeper models no longer fit
        for r in rows:
            self.assertLessEqual(float(r[4]), 15.0)  # 16 GiB less the 1 GiB reserve
            self.assertRegex(r[8], r"^\d+\.\d\dx$")


class BadInputTest(unittest.TestCase):
    def assert_input_error(self, expected, *args):
        result = plan(*args)
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertIn(expected, lines[0])

    def test_bad_inputs(self):
        common = ("--model", LOCAL, "--memory", "8")
        self.assert_input_error("--network '5us'", *common, "--cost", "1:1", "--network", "5us",
                                "--predict", "-D", "4", "-N", "4")
        self.assert_input_error("exactly one of --costs FILE", *common, "--predict", "-D", "4",
                                "-N", "4")
        self.assert_input_error("exactly one of --costs FILE", *common, "--cost", "1:1",
                                "--costs", P100, "--predict", "-D", "4", "-N", "4")
        for bad in ("1:x", "1", "1:2:3:4", "1:-2", "1:2:3"):
            self.assert_input_error(f"--cost '{bad}'", *common, "--cost", bad, "--predict",
                                    "-D", "4", "-N", "4")
        self.assert_input_error("chimera needs an even D", *common, "--cost", "1:1", "--predict",
                                "-D", "3", "-N", "4")
        self.assert_input_error("scheme 'chimaera' is not one of", *common, "--cost", "1:1",
                                "--predict", "--schemes", "chimaera", "-D", "4", "-N", "4")
        self.assert_input_error("the costs are for n_embd 1280", *common, "--costs", P100,
                                "--predict", "-D", "4", "-N", "4")
        self.assert_input_error("needs --nodes P and --global-batch G", *common, "--cost", "1:1")
        self.assert_input_error("--reserve 9 GiB", *common, "--cost", "1:1", "--reserve", "9",
                                "--nodes", "4", "--global-batch", "4")
        self.assert_input_error("cannot open config file", "--model", "absent.toml",
                                "--memory", "8", "--cost", "1:1", "--nodes", "4",
                                "--global-batch", "4")


if __name__ == "__main__":
    unittest.main()
