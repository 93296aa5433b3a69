#!/usr/bin/env python3
"""The multi-node code paths on emulated hosts: scripts/slurm-local up --hosts 4 --link 1gbit
runs each Slurm node in its own network namespace behind a shaped link, so `srun --mpi=pmix`
starts ranks that Open MPI sees on separate hosts (TCP between them, shared memory within one).

- the MPI tests of NodeComm, doorbells, core sharing and agreement with one rank per host and
  with two ranks on each of two hosts;
- the equality test (every scheme family equals one process, 1e-5) on 4 hosts, one rank each;
- `chimera train` of every scheme family on 4 hosts equals the same run on one host (1e-6), with
  the eager gradient allreduce crossing hosts;
- checkpoints written from 4 hosts into one directory, resumed on 2;
- an emulated run with runtime.network predicts its iteration as `chimera plan --predict` does;
- lost hosts: a link cut mid-step, and a host whose ranks are SIGKILLed, end every surviving rank
  within LOST_HOST_BOUND_S, with one line naming the lost peer and the wait, status 1, and the
  newest checkpoint loads.

Usage: test_multihost.py CHIMERA TEST_MPI_COMM TEST_MPI_EQUALITY [unittest args]
The hosts are brought up if they are not (root and network namespaces needed: otherwise every
case skips, saying why) and taken down again by this test; CTest's cleanup fixture
(multihost.down) takes them down even when this process dies.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "slurm"))
from test_slurm import write_tokens  # noqa: E402  the same tiny token file as the Slurm test
SLURM_LOCAL = REPO / "scripts" / "slurm-local"
HOSTS, LINK = 4, "1gbit"
# The watchdog's floor is 120 s (runtime/step_watchdog.hpp); the job ends within that plus the
# step bound's margin and the launcher's teardown.
LOST_HOST_BOUND_S = 180
BIN = {}
SKIP = None
STARTED_HERE = False

# A tiny real model (losses must be real numbers to compare, checkpoints real weights).
TINY = ["--set", "model.n_layer=4", "--set", "model.n_embd=32", "--set", "model.n_head=2",
        "--set", "model.n_ctx=16", "--set", "model.vocab_size=96", "--set", "data.seq_len=16",
        "--set", "train.seed=7", "--set", "parallel.micro_batch_size=2",
        "--config", str(REPO / "jobscripts/configs/local.toml")]


def slurm_local(*args, timeout=120, check=True):
    r = subprocess.run([str(SLURM_LOCAL), *args], capture_output=True, text=True,
                       timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"slurm-local {' '.join(args)} exited {r.returncode}: "
                             f"{r.stdout}{r.stderr}")
    return r


def setUpModule():
    global SKIP, STARTED_HERE
    hosts = slurm_local("hosts", check=False)
    if hosts.returncode == 0 and len(hosts.stdout.splitlines()) == HOSTS:
        return
    up = slurm_local("up", "--hosts", str(HOSTS), "--link", LINK, timeout=300, check=False)
    if up.returncode == 3:  # no root or no namespaces: the one line that says so
        SKIP = "multihost: " + up.stderr.strip().splitlines()[-1]
        return
    if up.returncode != 0:
        raise RuntimeError(f"scripts/slurm-local up --hosts failed:\n{up.stdout}{up.stderr}")
    STARTED_HERE = True


def tearDownModule():
    # Under CTest the cleanup fixture multihost.down takes the hosts down after the last case.
    if STARTED_HERE and not os.environ.get("CHIMERA_MULTIHOST_FIXTURE"):
        slurm_local("down", timeout=120, check=False)


def env():
    return dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")


def srun(nodes, ntasks, *command, nodelist=None, timeout=300, extra_env=None):
    """A job step on `nodes` hosts, `ntasks` ranks spread evenly; (CompletedProcess, seconds)."""
    args = [str(SLURM_LOCAL), "exec", "srun", "--mpi=pmix", f"--nodes={nodes}",
            f"--ntasks={ntasks}", f"--ntasks-per-node={ntasks // nodes}", "--cpus-per-task=1",
            "--time=10", "--kill-on-bad-exit=1"]
    if nodelist:
        args.append(f"--nodelist={nodelist}")
    started = time.monotonic()
    r = subprocess.run(args + [str(c) for c in command], capture_output=True, text=True,
                       cwd=REPO, timeout=timeout, env=dict(env(), **(extra_env or {})))
    return r, time.monotonic() - started


def mpirun_here(ntasks, *command, timeout=300):
    """The same ranks on this one host (Open MPI's shared memory between all of them)."""
    r = subprocess.run(["mpirun", "-np", str(ntasks), "--oversubscribe", "--allow-run-as-root",
                        *map(str, command)], capture_output=True, text=True, cwd=REPO,
                       timeout=timeout, env=env())
    return r


def metrics(path):
    """step -> (loss, grad_norm); a resumed run appends, the last record of a step wins."""
    out = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            out[rec["step"]] = (rec["loss"], rec["grad_norm"])
    return out


def chimera_processes(node):
    """Pids of chimera ranks inside host NODE's network namespace."""
    r = subprocess.run(["ip", "netns", "pids", f"chimera-{node}"], capture_output=True,
                       text=True)
    pids = []
    for pid in r.stdout.split():
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "chimera":
                pids.append(int(pid))
        except OSError:
            pass
    return pids


class MultiHost(unittest.TestCase):
    def setUp(self):
        if SKIP:
            self.skipTest(SKIP)
        self.tmp = Path(tempfile.mkdtemp(prefix="chimera-multihost-", dir=REPO / "build"))
        self.data = self.tmp / "tokens.h5"
        write_tokens(self.data, 1 << 15)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def train_args(self, scheme, w, d, n, steps, *extra):
        return [BIN["chimera"], "train", *TINY, "--set", f"data.train={self.data}",
                "--set", f"parallel.scheme={scheme}", "--set", f"parallel.stages={d}",
                "--set", f"parallel.micro_batches={n}", "--steps", str(steps), *extra]

    def test_comm_paths_with_one_rank_per_host_and_two_per_host(self):
        for nodes, ntasks in ((4, 4), (2, 4)):
            with self.subTest(hosts=nodes, ranks=ntasks):
                r, took = srun(nodes, ntasks, BIN["test_mpi_comm"])
                self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-4000:])
                self.assertRegex(r.stdout, r"\[  PASSED  \] \d+ test")
                self.assertNotIn("FAILED", r.stdout)
                print(f"test_mpi_comm on {nodes} hosts x {ntasks // nodes}: {took:.1f} s",
                      file=sys.stderr)

    def test_comm_paths_links_take_offload_packets_whole(self):
        # A packet larger than its token bucket's burst is split into wire-size packets by tbf in
        # software; on this 2-core machine that took half its time and slowed every link.
        for line in slurm_local("hosts").stdout.splitlines():
            node, _, host_ns = line.split()  # "n3 10.217.34.3 chimera-n3"; its port is port3
            for ns, dev in ((host_ns, "eth0"), ("chimera-head", f"port{node.lstrip('n')}")):
                with self.subTest(namespace=ns, device=dev):
                    link = subprocess.run(["ip", "-j", "-d", "-n", ns, "link", "show", dev],
                                          capture_output=True, text=True, check=True)
                    qdisc = subprocess.run(["tc", "-j", "-n", ns, "qdisc", "show", "dev", dev],
                                           capture_output=True, text=True, check=True)
                    gso = json.loads(link.stdout)[0]["gso_max_size"]
                    (root,) = [q for q in json.loads(qdisc.stdout) if q.get("root")]
                    self.assertEqual(root["kind"], "tbf")
                    burst = root["options"]["burst"]
                    # An offload packet is counted with the headers of every segment it stands
                    # for (up to ~5% more): half the burst leaves room for them.
                    self.assertLessEqual(gso, burst // 2 + 64, f"gso_max_size {gso}, burst {burst}")

    def test_equality_with_one_rank_per_host(self):
        r, took = srun(4, 4, BIN["test_mpi_equality"],
                       timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout[-6000:] + r.stderr[-4000:])
        self.assertRegex(r.stdout, r"\[  PASSED  \] \d+ test")
        print(f"test_mpi_equality on 4 hosts: {took:.1f} s", file=sys.stderr)

    def test_training_on_four_hosts_equals_one_host(self):
        # Every scheme family at D=2 x W=2 (the gradient allreduce between replicas crosses
        # hosts) and D=4 x W=1 (every activation crosses a link), one rank per host.
        cases = [("gpipe", 2, 2), ("1f1b", 2, 2), ("gems", 2, 2), ("chimera", 2, 2),
                 ("interleaved", 2, 2), ("zb-h1", 2, 2), ("chimera", 1, 4), ("1f1b", 1, 4)]
        for scheme, w, d in cases:
            with self.subTest(scheme=scheme, W=w, D=d):
                here, there = self.tmp / f"{scheme}-{d}-here.jsonl", self.tmp / f"{scheme}-{d}-hosts.jsonl"
                one = mpirun_here(w * d, *self.train_args(scheme, w, d, 2 * d, 3,
                                                          "--metrics", here))
                self.assertEqual(one.returncode, 0, one.stderr[-3000:])
                r, _ = srun(4, w * d, *self.train_args(scheme, w, d, 2 * d, 3, "--metrics", there))
                self.assertEqual(r.returncode, 0, r.stderr[-3000:])
                # One rank per host: node-local rank 0 everywhere, from Slurm.
                self.assertIn("node-local ranks (SLURM_LOCALID): 0 0 0 0", r.stdout + r.stderr)
                a, b = metrics(here), metrics(there)
                self.assertEqual(sorted(a), [0, 1, 2])
                self.assertEqual(sorted(b), sorted(a))
                for step in a:
                    for x, y in zip(a[step], b[step]):
                        self.assertLessEqual(abs(x - y), 1e-6 * abs(x), (scheme, step, a, b))

    def test_an_emulated_run_predicts_itself_as_the_planner_does(self):
        # With runtime.network an emulated run's simulator figure is `chimera plan --predict` of
        # its layout: the ranks per host from the launcher (1 here), the messages and gradient
        # sums priced on the given network, not only the compute.
        network, cost = "8us,8.4ns/B,binomial", "10:20"
        r, _ = srun(4, 4, *self.train_args("chimera", 2, 2, 4, 2, "--compute", "emulate",
                                           "--cost", cost, "--network", network))
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        out = r.stdout + r.stderr
        found = re.search(r"simulator: ([0-9.]+) ms per iteration for these costs and "
                          r"runtime.network \((.*)\)", out)
        self.assertIsNotNone(found, out[-3000:])
        self.assertIn("1 rank per host", found.group(2))
        sims = re.findall(r"\(sim ([0-9.]+)\)", out)
        self.assertEqual(len(sims), 2, out[-3000:])
        # The model and sequence of TINY; its micro-batch size 2 is -B 2.
        model_sets = [f"--set={kv}" for flag, kv in zip(TINY[::2], TINY[1::2])
                      if flag == "--set" and kv.startswith(("model.", "data."))]
        plan = subprocess.run(
            [BIN["chimera"], "plan", "--model", str(REPO / "jobscripts/configs/local.toml"),
             *model_sets,
             "--memory", "1024", "--reserve", "0", "--cost", cost, "--network", network,
             "--shard-optimizer", "--ranks-per-host", "1", "--predict", "--format", "json",
             "--schemes", "chimera", "-W", "2", "-D", "2", "-N", "4", "-B", "2"],
            capture_output=True, text=True, cwd=REPO)
        self.assertEqual(plan.returncode, 0, plan.stderr)
        predicted = json.loads(plan.stdout.splitlines()[0])
        self.assertGreater(predicted["p2p_ms"] + predicted["allreduce_exposed_ms"], 0.0)
        self.assertAlmostEqual(float(found.group(1)), predicted["iteration_ms"], delta=0.01)
        for sim in sims:
            self.assertAlmostEqual(float(sim), predicted["iteration_ms"], delta=0.05)

    def test_an_emulated_run_of_two_sums_sharing_links_beside_the_model(self):
        # `chimera bench sums`: two sums of 1 MiB over the same 4 hosts (two ranks on each), timed
        # and priced. The model: every message of each shares both its links with the other's,
        # 10 beta L (5 messages of the tree, each at half rate), plus latencies.
        network, beta_ms = "8us,8.4ns/B", 8.4e-6
        r, _ = srun(4, 8, BIN["chimera"], "bench", "sums", "--sum", "1048576:0,2,4,6", "--sum",
                    "1048576:1,3,5,7", "--network", network, "--repeats", "3")
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        rows = {m.group(1): [float(x) for x in m.group(2, 3, 4, 5, 6)] for m in re.finditer(
            r"^\s*(0|1|all)\s.*?\s(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+"
            r"[0-9.]+\s*$", r.stdout + r.stderr, re.M)}
        self.assertEqual(sorted(rows), ["0", "1", "all"], r.stdout + r.stderr)
        for name, (hosts, low, median, high, model) in rows.items():
            self.assertEqual(hosts, 4, name)
            self.assertLessEqual(low, median)
            self.assertLessEqual(median, high)
            self.assertAlmostEqual(model, 10 * beta_ms * 1048576, delta=0.2, msg=name)
            # Measured on a 1 Gbit/s link (bench p2p: 8.39 ns/B): the model's own scale.
            self.assertGreater(median / model, 0.5, name)
            self.assertLess(median / model, 2.0, name)
        # Two ranks of each host take part: the weight of the later one that fits the medians.
        fit = re.search(r"later-rank weight that fits the last sum's median: ([0-9.]+)",
                        r.stdout + r.stderr)
        self.assertIsNotNone(fit, r.stdout + r.stderr)
        self.assertGreaterEqual(float(fit.group(1)), 0.05)
        self.assertLessEqual(float(fit.group(1)), 1.0)

    def test_an_emulated_run_wider_than_the_cluster_is_refused_at_once(self):
        # A job for more hosts than the cluster has is refused at submission, not left pending
        # (slurm.conf's EnforcePartLimits), and validate_plan says so before it starts anything.
        started = time.monotonic()
        r = subprocess.run([str(SLURM_LOCAL), "exec", "salloc", f"--nodes={HOSTS + 1}",
                            "--time=1", "true"], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertLess(time.monotonic() - started, 30.0)
        v = subprocess.run([str(REPO / "jobscripts/local/validate_plan"), "--hosts",
                            str(2 * HOSTS), "--bin", BIN["chimera"]], capture_output=True,
                           text=True, cwd=REPO, timeout=60)
        self.assertEqual(v.returncode, 2, v.stdout + v.stderr)
        self.assertIn(f"the emulated cluster has {HOSTS} hosts", v.stderr)
        self.assertEqual(len(v.stderr.strip().splitlines()), 1, v.stderr)

    def test_checkpoints_from_four_hosts_resume_on_two(self):
        ckpt, out = self.tmp / "ckpt", self.tmp / "m.jsonl"
        ref = self.tmp / "ref.jsonl"
        args = lambda *extra: self.train_args("chimera", 2, 2, 4, 8, "--metrics", out,
                                              "--save-dir", ckpt, "--save-every", "2", *extra)
        r, _ = srun(4, 4, *args("--stop-after", "5"))
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        saved = sorted(p.name for p in ckpt.glob("ckpt-*.h5"))
        self.assertTrue(saved, "no checkpoint written")
        # Resumed by 4 ranks on 2 hosts (2 each): shared memory within a host, TCP between.
        r, _ = srun(2, 4, *args("--resume"))
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertRegex(r.stdout + r.stderr, r"resumed from \S+ at step 5")
        whole = mpirun_here(4, *self.train_args("chimera", 2, 2, 4, 8, "--metrics", ref))
        self.assertEqual(whole.returncode, 0, whole.stderr[-3000:])
        got, want = metrics(out), metrics(ref)
        self.assertEqual(sorted(got), list(range(8)))
        for step in want:
            for x, y in zip(want[step], got[step]):
                self.assertLessEqual(abs(x - y), 1e-6 * abs(x), (step, got, want))

    def lose_a_host(self, how, *extra):
        """Trains on 4 hosts (W=2 x D=2, checkpoints every 5 steps) with the watchdog as it
        is by default unless `extra` sets it; after step 6 and once the first checkpoint is
        complete (`latest` names it: a background save may finish a few steps after its own),
        host n3 is lost `how` (cut: its link goes down; kill: its ranks are SIGKILLed).
        Returns (output, seconds from the loss until no rank of the other hosts is left, srun's
        status)."""
        ckpt, out = self.tmp / "ckpt", self.tmp / "m.jsonl"
        args = [str(SLURM_LOCAL), "exec", "srun", "--mpi=pmix", "--nodes=4", "--ntasks=4",
                "--ntasks-per-node=1", "--cpus-per-task=1", "--time=10",
                *map(str, self.train_args("chimera", 2, 2, 4, 100000, "--metrics", out,
                                          "--save-dir", ckpt, "--save-every", "5", *extra))]
        log = open(self.tmp / "job.log", "w+")
        job = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env(),
                               start_new_session=True)
        survivors = ("n1", "n2", "n4")
        try:
            deadline = time.monotonic() + 120
            while not (out.exists() and len(metrics(out)) >= 6 and (ckpt / "latest").exists()):
                self.assertIsNone(job.poll(), "the job ended before step 6")
                self.assertLess(time.monotonic(), deadline, "the job never reached step 6 with a checkpoint")
                time.sleep(0.2)
            lost_at = time.monotonic()
            if how == "cut":
                slurm_local("cut", "n3")
            else:
                for pid in chimera_processes("n3"):
                    os.kill(pid, signal.SIGKILL)
            while any(chimera_processes(n) for n in survivors):
                if time.monotonic() - lost_at > LOST_HOST_BOUND_S + 60:
                    break
                time.sleep(0.5)
            took = time.monotonic() - lost_at
        finally:
            if how == "cut":
                slurm_local("heal", "n3", check=False)
            try:
                status = job.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
                status = job.wait()
            for node in ("n1", "n2", "n3", "n4"):  # nothing of this job outlives the test
                for pid in chimera_processes(node):
                    os.kill(pid, signal.SIGKILL)
            slurm_local("exec", "scancel", "--quiet", "--partition=debug", check=False)
        log.seek(0)
        text = log.read()
        log.close()
        print(f"lost host ({how}): survivors ended {took:.1f} s after the loss", file=sys.stderr)
        return text, took, status

    def assert_lost_host_reported(self, text, took, status, watchdog):
        """Returns the first error line of a rank (`[rank R] error: ...`); `watchdog` is the
        start of the watchdog's announcement the run must print."""
        self.assertLessEqual(took, LOST_HOST_BOUND_S, text[-4000:])
        self.assertNotEqual(status, 0)
        self.assertIn(watchdog, text)
        ours = [l for l in text.splitlines() if re.match(r"\[rank \d+\] error: ", l)]
        self.assertTrue(ours, text[-4000:])
        print(f"the line: {ours[0]}", file=sys.stderr)
        # The newest checkpoint loads: 4 ranks on two of the remaining hosts resume it.
        r, _ = srun(2, 4, *self.train_args("chimera", 2, 2, 4, 1, "--save-dir",
                                           self.tmp / "ckpt", "--resume"))
        self.assertNotIn("error", r.stderr, r.stderr[-3000:])
        self.assertRegex(r.stdout + r.stderr, r"resumed from \S+ at step [1-9]")
        return ours[0]

    def test_a_cut_link_ends_the_job_naming_the_lost_host(self):
        # Nothing reports a cut link (TCP retransmits into the void): the watchdog ends the job.
        # The watchdog as it is by default: its floor bounds the job's end.
        text, took, status = self.lose_a_host("cut")
        line = self.assert_lost_host_reported(
            text, took, status, "watchdog: a wait longer than max(120 s, 20 x the median step")
        self.assertIn("error: watchdog:", line)
        # It names what it waited in, one of the waits a step or a save makes, wherever the cut
        # lands (the checkpoint writer's agreement after a phase of a save included).
        self.assertRegex(line, r"waited [\d.]+ s, more than runtime\.watchdog_s \(\d+ s\), in "
                               r"(recv|send|allreduce|the barrier|the checkpoint writer"
                               r"|the check whether every rank has written|the reduction of"
                               r"|the agreement after)"
                               r"|waiting in the ")
        self.assertIn("ending the job with status 1 (internal/system failure)", line)
        # It names the lost peer and its host: the one awaited for a message; for a collective,
        # the one of its ranks that answered no probe (the survivors answer theirs).
        self.assertRegex(line, r"(in (recv|send) .*from rank \d+ on host n3\b"
                               r"|; rank \d+ on host n3 answered no probe within \d+ s;)")

    def test_a_killed_host_ends_the_job_naming_it(self):
        # A killed host's connections close: the transport reports it, and the rank that sees
        # it first ends the job naming the MPI call it was in (or the watchdog ends it); srun
        # names the host whose task was killed.
        # The cut link above shows the default watchdog's bound; here a 30 s watchdog saves
        # CI 90 s of waiting where the transport does not report the loss first.
        text, took, status = self.lose_a_host("kill", "--set", "runtime.watchdog_s=30")
        line = self.assert_lost_host_reported(
            text, took, status, "watchdog: a wait longer than 30.0 s (runtime.watchdog_s)")
        self.assertRegex(line, r"error: watchdog: |error: .*(MPI_\w+)\(.*\) failed: ")
        self.assertRegex(text, r"from rank \d+ on host n3|srun: error: n3: tasks? [\d-]+: Killed")


if __name__ == "__main__":
    names = ["chimera", "test_mpi_comm", "test_mpi_equality"]
    for name in names:
        BIN[name] = Path(sys.argv.pop(1)).resolve()
    result = unittest.main(verbosity=2, exit=False).result
    if result.testsRun == 0:  # a -k pattern that matches nothing must not pass
        sys.exit("test_multihost.py: no test matched")
    sys.exit(0 if result.wasSuccessful() else 1)
