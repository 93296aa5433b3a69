#!/usr/bin/python3
"""An outside list scheduler for schedule JSON (DESIGN §3), independent of chimera's simulator.

Every worker runs its ops in the listed order, each as soon as the previous op on the worker has
ended and its inputs exist: an F at stage s > 0 needs the F of (pipe, s-1, mb); a B or I below the
last stage needs the B or I of (pipe, s+1, mb), on the last stage its own F; a W its own I.
Messages are free. Costs per micro-batch an op covers, through 1/D of the model: an op of a
schedule with 2D stages (the V's) costs half, a halving op (half a micro-batch) half. Prints the
makespan and the most ops' activations held per worker (an F adds, a B or W frees).

  chimera schedule --scheme chimera-zb -D 8 -N 16 --format json | list_schedule.py 1 2 1 1

As a test (`--check D ...`): for each D, runs `CHIMERA schedule` for chimera-zb, chimera (direct,
doubling, halving), zb-h1 and 1f1b at N = 2D, F:B = 1:2 with I = W = 1, and exits 1 unless
chimera-zb's makespan is below every other one and it holds at most D micro-batches per worker;
then the same for bitpipe-zb against bitpipe, chimera-zb and zb-v at F:B = 1:1 and 1:2, both with
I = W = B/2, bitpipe-zb holding at most 2D chunks (D micro-batches through 1/D of the model).
"""
import json
import subprocess
import sys


def makespan(schedule, F, B, I, W):
    # Halving's ops cover half micro-batches, the V's 2D stages half of 1/D of the model.
    scale = len(schedule["workers"]) / schedule["stages"] / schedule.get("mb_split", 1)
    cost = {"F": F * scale, "B": B * scale, "I": I * scale, "W": W * scale}
    stages = schedule["stages"]
    workers = schedule["workers"]
    end = {}  # (kind, pipe, stage, mb) -> end time
    pos = [0] * len(workers)
    clock = [0.0] * len(workers)
    held = [0] * len(workers)
    peak = [0] * len(workers)

    def inputs(op, mb):
        p, s, k = op["pipe"], op["stage"], op["op"]
        if k == "F":
            return [("F", p, s - 1, mb)] if s > 0 else []
        if k == "W":
            return [("I", p, s, mb)]
        if s == stages - 1:
            return [("F", p, s, mb)]
        return [("B", p, s + 1, mb), ("I", p, s + 1, mb)]  # whichever the producer ran

    progress = True
    while progress:
        progress = False
        for w, ops in enumerate(workers):
            while pos[w] < len(ops):
                op = ops[pos[w]]
                ready = clock[w]
                ok = True
                for mb in op["mbs"]:
                    needs = inputs(op, mb)
                    if op["op"] in ("B", "I") and op["stage"] < stages - 1:
                        found = [end[n] for n in needs if n in end]
                        if not found:
                            ok = False
                            break
                        ready = max(ready, found[0])
                    else:
                        for n in needs:
                            if n not in end:
                                ok = False
                                break
                            ready = max(ready, end[n])
                    if not ok:
                        break
                if not ok:
                    break
                clock[w] = ready + cost[op["op"]] * len(op["mbs"])
                for mb in op["mbs"]:
                    end[(op["op"], op["pipe"], op["stage"], mb)] = clock[w]
                if op["op"] == "F":
                    held[w] += len(op["mbs"])
                elif op["op"] in ("B", "W"):
                    held[w] -= len(op["mbs"])
                peak[w] = max(peak[w], held[w])
                pos[w] += 1
                progress = True
    if any(pos[w] < len(ops) for w, ops in enumerate(workers)):
        raise SystemExit("the schedule deadlocks")
    return max(clock), max(peak)


def schedule_json(chimera, scheme, D, N, variant=None):
    args = [chimera, "schedule", "--scheme", scheme, "-D", str(D), "-N", str(N), "--format", "json"]
    if variant:
        args += ["--variant", variant]
    return json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)


def check(chimera, dims):
    failed = False
    for D in dims:
        N = 2 * D
        ours, held = makespan(schedule_json(chimera, "chimera-zb", D, N), 1, 2, 1, 1)
        print(f"D={D} N={N}: chimera-zb {ours:g} (at most {held} held per worker)")
        if held > D:
            print(f"  FAIL: holds {held} > D micro-batches")
            failed = True
        for scheme, variant in [("zb-h1", None), ("chimera", "direct"), ("chimera", "doubling"),
                                ("chimera", "halving"), ("1f1b", None)]:
            other, _ = makespan(schedule_json(chimera, scheme, D, N, variant), 1, 2, 1, 1)
            print(f"  {scheme} {variant or ''}: {other:g}")
            if not ours < other:
                print(f"  FAIL: chimera-zb is not below {scheme} {variant or ''}")
                failed = True
        for F, B in [(1, 1), (1, 2)]:
            ours, held = makespan(schedule_json(chimera, "bitpipe-zb", D, N), F, B, B / 2, B / 2)
            print(f"D={D} N={N} F:B={F}:{B}: bitpipe-zb {ours:g} (at most {held} chunks held)")
            if held > 2 * D:
                print(f"  FAIL: holds {held} > 2D chunks")
                failed = True
            for scheme in ("bitpipe", "chimera-zb", "zb-v"):
                other, _ = makespan(schedule_json(chimera, scheme, D, N), F, B, B / 2, B / 2)
                print(f"  {scheme}: {other:g}")
                if not ours < other:
                    print(f"  FAIL: bitpipe-zb is not below {scheme}")
                    failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2], [int(d) for d in sys.argv[3:]]))
    F, B, I, W = (float(x) for x in sys.argv[1:5])
    m, held = makespan(json.load(sys.stdin), F, B, I, W)
    print(f"makespan {m:g}, at most {held} micro-batches held per worker")
