import json
import tempfile
import unittest
from pathlib import Path

import helpers
from chimera_analysis import AnalysisError
from chimera_analysis.theory import bubble_ratio
from chimera_analysis.trace import (COMPUTE, ComputeOp, events_of_step, parse_op_name,
                                    peak_in_flight, read_trace, steps)

# DESIGN §3: Chimera D=4 N=4 with unit slots; the committed sample trace is this grid (1 ms a
# slot, two iterations).
CHIMERA_D4N4 = """\
F0d0 .    F1d0 F2u3 B2u3 F3u3 B3u3 B0d0 .    B1d0
.    F0d1 F2u2 F1d1 F3u2 B2u2 B0d1 B3u2 B1d1 .
.    F2u1 F0d2 F3u1 F1d2 B0d2 B2u1 B1d2 B3u1 .
F2u0 .    F3u0 F0d3 B0d3 F1d3 B1d3 B2u0 .    B3u0"""


def grid_of(events, slot_us=1000.0):
    origin = min(e.ts_us for e in events)
    rows = []
    for rank in sorted({e.rank for e in events}):
        row = ["."] * 10
        for e in events:
            if e.rank == rank and e.lane == COMPUTE:
                op = parse_op_name(e.name)
                row[round((e.ts_us - origin) / slot_us)] = (
                    f"{op.kind}{op.mbs[0]}{'du'[op.pipe]}{op.stage}")
        rows.append(row)
    return rows


class TraceTest(unittest.TestCase):
    def test_op_names(self):
        self.assertEqual(parse_op_name("F3 s1 down"), ComputeOp("F", (3,), 1, 0))
        self.assertEqual(parse_op_name("B0,1 s2 up"), ComputeOp("B", (0, 1), 2, 1))
        self.assertEqual(parse_op_name("F5 s0 p2"), ComputeOp("F", (5,), 0, 2))
        self.assertEqual(parse_op_name("W4 s3"), ComputeOp("W", (4,), 3, 0))
        for bad in ("F3", "X1 s0", "F1 s0 sideways", "F1,  s0"):
            with self.assertRaises(AnalysisError):
                parse_op_name(bad)

    def test_chimera_sample_is_the_design_grid(self):
        events = read_trace(helpers.SAMPLES / "traces" / "chimera_d4n4.json")
        self.assertEqual(steps(events), [0, 1])
        expected = [line.split() for line in CHIMERA_D4N4.splitlines()]
        for step in (0, 1):
            self.assertEqual(grid_of(events_of_step(events, step)), expected)
        with self.assertRaisesRegex(AnalysisError, "no events of step 7"):
            events_of_step(events, 7)

    def test_peak_in_flight(self):
        chimera = read_trace(helpers.SAMPLES / "traces" / "chimera_d4n4.json")
        gpipe = read_trace(helpers.SAMPLES / "traces" / "gpipe_d4n4.json")
        # Chimera balances activations (D/2+1 .. D); GPipe holds all N on every worker.
        self.assertEqual(peak_in_flight(chimera), {0: 3, 1: 4, 2: 4, 3: 3})
        self.assertEqual(peak_in_flight(gpipe), {0: 4, 1: 4, 2: 4, 3: 4})

    def test_emulated_run_trace(self):
        # A trace of `chimera train --compute emulate` (jobscripts/local/bubble_study): the ops of
        # each rank run in the order of the DESIGN grid, whatever their timing.
        events = read_trace(helpers.SAMPLES / "traces" / "chimera_d4n4_emulated.json")
        expected = [[tok for tok in line.split() if tok != "."]
                    for line in CHIMERA_D4N4.splitlines()]
        step = steps(events)[-1]
        for rank in range(4):
            ops = [parse_op_name(e.name) for e in events_of_step(events, step)
                   if e.rank == rank and e.lane == COMPUTE]
            self.assertEqual([f"{o.kind}{o.mbs[0]}{'du'[o.pipe]}{o.stage}" for o in ops],
                             expected[rank])
        self.assertEqual(peak_in_flight(events), {0: 3, 1: 4, 2: 4, 3: 3})
        lanes = {e.lane for e in events}
        self.assertEqual(lanes, {0, 1, 2})
        one_f_one_b = read_trace(helpers.SAMPLES / "traces" / "1f1b_d4n4_emulated.json")
        self.assertEqual(peak_in_flight(one_f_one_b), {0: 4, 1: 3, 2: 2, 3: 1})

    def test_bad_traces(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "t.json"
            path.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "F0 s0", "pid": 0,
                                                         "tid": 5, "ts": 0, "dur": 1}]}))
            with self.assertRaisesRegex(AnalysisError, r"traceEvents\[0\]"):
                read_trace(path)
            path.write_text(json.dumps({"traceEvents": [{"ph": "M", "name": "x"}]}))
            with self.assertRaisesRegex(AnalysisError, "no complete"):
                read_trace(path)
            path.write_text("{")
            with self.assertRaisesRegex(AnalysisError, "not valid JSON"):
                read_trace(path)
            # The bare-array form of the Chrome trace format is accepted too.
            path.write_text(json.dumps([{"ph": "X", "name": "F0 s0", "pid": 1, "tid": 0,
                                         "ts": 5, "dur": 2}]))
            (event,) = read_trace(path)
            self.assertEqual((event.rank, event.end_us, event.step), (1, 7.0, 0))


class TheoryTest(unittest.TestCase):
    def test_closed_forms(self):
        self.assertAlmostEqual(bubble_ratio("chimera", 4, 4), 2 / 10)
        self.assertAlmostEqual(bubble_ratio("chimera", 8, 16), 6 / 38)
        self.assertAlmostEqual(bubble_ratio("gpipe", 4, 4), 3 / 7)
        self.assertAlmostEqual(bubble_ratio("1f1b", 8, 32), 7 / 39)
        # 2f = 4 pipes at D = 8: D/f - 2 = 2 idle slots.
        self.assertAlmostEqual(bubble_ratio("chimera", 8, 8, pipes=4), 2 / 18)
        self.assertIsNone(bubble_ratio("gems", 4, 4))


if __name__ == "__main__":
    unittest.main()
