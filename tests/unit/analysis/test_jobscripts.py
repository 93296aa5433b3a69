"""The study drivers and run_point, end to end with a stand-in binary (fake_chimera)."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

import helpers
from chimera_analysis.runs import collect_study

FAKE = Path(__file__).resolve().parent / "fake_chimera"
ENV = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")


def run(*args, check=True):
    result = subprocess.run(list(args), cwd=helpers.SOURCE_DIR, env=ENV, capture_output=True,
                            text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"{args} exited {result.returncode}: {result.stderr}")
    return result


def option(line, flag):
    m = re.search(rf"(?:^| ){re.escape(flag)}[= ](\S+)", line)
    return m.group(1) if m else None


class DriverDryRunTest(unittest.TestCase):
    def test_weak_scaling_submits_every_point(self):
        out = run("jobscripts/weak_scaling", "--dry-run", "--bin", "/nonexistent").stdout
        lines = out.splitlines()
        self.assertEqual(len(lines), 4 * 7)  # 4 schemes x 32..2048 nodes
        for line in lines:
            self.assertTrue(line.startswith("sbatch "))
            self.assertIn("jobscripts/daint/chimera.sbatch", line)
            W, D, N = (int(option(line, f)) for f in ("-W", "-D", "-N"))
            self.assertEqual(int(option(line, "--nodes")), W * D)
            self.assertEqual((D, N), (32, 32))
            name = option(line, "--job-name")
            self.assertEqual(option(line, "--output"), f"runs/weak/{name}.%j.out")
            self.assertTrue(name.endswith(f"-P{W * D}-W{W}-D{D}-N{N}-B1"), name)
        nodes = sorted({int(option(line, "--nodes")) for line in lines})
        self.assertEqual(nodes, [32, 64, 128, 256, 512, 1024, 2048])

    def test_strong_scaling_keeps_the_global_batch(self):
        out = run("jobscripts/strong_scaling", "--dry-run", "--schemes", "chimera,1f1b",
                  "--nodes", "8,16,32", "-D", "4", "--global-batch", "64", "-B", "2",
                  "--account", "g34", "--bin", "/nonexistent").stdout
        lines = out.splitlines()
        self.assertEqual(len(lines), 6)
        for line in lines:
            W, N, B = (int(option(line, f)) for f in ("-W", "-N", "-B"))
            self.assertEqual(W * N * B, 64)
            self.assertEqual(option(line, "--account"), "g34")

    def test_points_the_binary_refuses_are_skipped(self):
        result = run("jobscripts/strong_scaling", "--dry-run", "--schemes", "chimera",
                     "--nodes", "4,8,32", "-D", "4", "--global-batch", "16", "--bin", str(FAKE))
        self.assertEqual(len(result.stdout.splitlines()), 2)  # N = 16, 8; N = 2 < D is refused
        self.assertIn("skip chimera W=8 D=4 N=2: chimera needs N >= D", result.stderr)

    def test_local_twin_uses_mpirun_and_emulation(self):
        lines = run("jobscripts/local/weak_scaling", "--dry-run", "--nodes", "4,32").stdout.splitlines()
        self.assertEqual(len(lines), 3 * 2)
        for line in lines:
            self.assertTrue(line.startswith("mpirun -np "))
            self.assertIn("--compute emulate --cost 10:20", line)
            self.assertIn("--set parallel.stages=4", line)

    def test_local_cluster_submits_the_template_with_its_settings(self):
        lines = run("jobscripts/weak_scaling", "--cluster", "local", "--dry-run",
                    "--bin", "/nonexistent").stdout.splitlines()
        self.assertEqual(len(lines), 3 * 3)  # chimera, 1f1b, gpipe x 4, 8, 16 ranks
        for line in lines:
            self.assertTrue(line.startswith("sbatch "))
            self.assertIn("jobscripts/daint/chimera.sbatch", line)
            self.assertIn("--partition=debug --constraint= --cpus-per-task=1", line)
            self.assertIn("--compute emulate --cost 10:20", line)
            ranks = int(option(line, "--ntasks"))
            self.assertEqual(int(option(line, "--ntasks-per-node")), min(ranks, 4))
            self.assertEqual(int(option(line, "--nodes")), (ranks + 3) // 4)
        bad = run("jobscripts/weak_scaling", "--cluster", "mars", "--dry-run", check=False)
        self.assertEqual((bad.returncode, bad.stderr.startswith("error: --cluster")), (2, True))

    def test_bad_input_exits_2_with_one_line(self):
        for args in (["--nodes", "33"], ["-D", "0"], ["--frobnicate", "1"],
                     ["--config", "absent.toml"]):
            result = run("jobscripts/weak_scaling", "--dry-run", *args, check=False)
            self.assertEqual(result.returncode, 2, args)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
            self.assertTrue(result.stderr.startswith("error: "), result.stderr)


class RunPointTest(unittest.TestCase):
    """run_point under mpirun with the stand-in binary, then analysis/collect.py's parser."""

    def setUp(self):
        self.out = Path(tempfile.mkdtemp())

    def tearDown(self):
        shutil.rmtree(self.out)

    def point(self, *extra):
        return run("jobscripts/run_point", "--launcher", "mpirun", "--study", "t", "--scheme",
                   "chimera", "-W", "2", "-D", "2", "-N", "4", "--steps", "3", "--compute",
                   "emulate", "--cost", "1:2", "--out", str(self.out), "--bin", str(FAKE),
                   *extra, check=False)

    def test_success_and_failure_reach_the_table(self):
        ok = self.point()
        self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
        (self.out / "t-chimera-direct-P4-W2-D2-N4-B1.out").write_text(ok.stdout)
        bad = self.point("-B", "99")
        self.assertEqual(bad.returncode, 2)
        (self.out / "t-chimera-direct-P4-W2-D2-N4-B99.out").write_text(bad.stdout + bad.stderr)
        rows = {r["B"]: r for r in collect_study(self.out)}
        self.assertEqual(rows[1]["status"], "ok")
        self.assertEqual((rows[1]["nodes"], rows[1]["steps"], rows[1]["seq_len"]), (4, 3, 64))
        self.assertEqual(rows[1]["samples_per_s"], 100.0)
        self.assertEqual(rows[99]["status"], "failed")
        self.assertIn("micro_batch_size 99", rows[99]["error"])

    def test_seq_len_override_and_name_only(self):
        name = run("jobscripts/run_point", "--launcher", "srun", "--study", "s", "--scheme",
                   "gpipe", "-W", "1", "-D", "8", "-N", "16", "--pipes", "0", "--name-only").stdout
        self.assertEqual(name.strip(), "s-gpipe-P8-W1-D8-N16-B1")
        self.assertEqual(self.point("--set", "data.seq_len=32").returncode, 0)
        rows = collect_study(self.out)
        self.assertEqual(rows[0]["seq_len"], 32)


@unittest.skipUnless(shutil.which("shellcheck"), "shellcheck is not installed (scripts/setup)")
class ShellcheckTest(unittest.TestCase):
    def test_scripts_are_clean(self):
        # Every shell script of jobscripts/ (validate_plan is Python).
        scripts = [str(p.relative_to(helpers.SOURCE_DIR))
                   for p in sorted((helpers.SOURCE_DIR / "jobscripts").rglob("*"))
                   if p.is_file() and p.read_bytes()[:2] == b"#!" and b"bash" in
                   p.read_bytes().split(b"\n", 1)[0]] + ["jobscripts/lib/study.sh"]
        self.assertGreaterEqual(len(scripts), 9)
        result = run("shellcheck", "-x", *scripts, check=False)
        self.assertEqual(result.returncode, 0, result.stdout)


if __name__ == "__main__":
    unittest.main()
