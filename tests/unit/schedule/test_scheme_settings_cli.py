"""Every scheme setting given to a scheme it does not apply to is refused by `chimera train`,
`chimera schedule` and `chimera plan`: exit status 2 and one line naming the key and the schemes
it applies to (include/chimera/core/parallel_settings.hpp)."""
import os
import re
import subprocess
import unittest
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parents[3]
BIN = os.environ.get("CHIMERA_BIN", str(SOURCE_DIR / "build/release/bin/chimera"))
DEMO = str(SOURCE_DIR / "inputs/demo.toml")
LOCAL = str(SOURCE_DIR / "jobscripts/configs/local.toml")

# key -> (the schemes it applies to, a value that sets it)
SETTINGS = {
    "variant": (["chimera"], "halving"),
    "pipes": (["chimera"], "4"),
    "virtual": (["interleaved"], "3"),
    "max_in_flight": (["chimera-zb"], "8"),
}


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=120)


def scheme_names():
    """The one list, as `chimera schedule --help` prints it."""
    text = run("schedule", "--help").stdout
    listed = re.search(r"((?:[\w-]+,\s+)+[\w-]+) \(default chimera\)", text).group(1)
    return [name.strip() for name in listed.split(",")]


def commands(scheme, key, value):
    flag = "--" + key.replace("_", "-")
    sets = ["--set", f"parallel.scheme={scheme}", "--set", f"parallel.{key}={value}"]
    yield "train", ["train", "--config", DEMO, "--set", "train.steps=1", *sets]
    yield "schedule", ["schedule", "--scheme", scheme, "-D", "4", "-N", "8", flag, value]
    yield "plan", ["plan", "--model", LOCAL, "--memory", "64", "--cost", "1:2", "--predict",
                   "-D", "4", "-N", "8", *sets]


class SchemeSettings(unittest.TestCase):
    def test_one_list_of_schemes_everywhere(self):
        names = scheme_names()
        self.assertIn("chimera-zb", names)
        config_help = run("train", "--help-config").stdout
        self.assertIn("pipeline scheme: " + ", ".join(names) + ", or file:PATH", config_help)
        unknown = run("schedule", "--scheme", "pipedream")
        self.assertEqual(unknown.returncode, 2)
        self.assertIn("use one of " + ", ".join(names) + " or file:PATH", unknown.stderr)
        plan_help = re.sub(r"\s+", " ", run("plan", "--help").stdout)
        self.assertIn("comma-separated: " + ", ".join(names) + ";", plan_help)

    def test_settings_of_other_schemes_are_refused_by_every_command(self):
        names = scheme_names()
        pairs = 0
        for key, (applies_to, value) in SETTINGS.items():
            for scheme in names:
                if scheme in applies_to:
                    continue
                for command, args in commands(scheme, key, value):
                    with self.subTest(key=key, scheme=scheme, command=command):
                        r = run(*args)
                        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                        errors = [line for line in r.stderr.splitlines() if line.strip()]
                        self.assertEqual(len(errors), 1, r.stderr)
                        self.assertIn(f"parallel.{key}", errors[0])
                        self.assertIn(f"applies to {', '.join(applies_to)} only", errors[0])
                        self.assertIn(f"(scheme is {scheme})", errors[0])
                        pairs += 1
        self.assertEqual(pairs, 3 * sum(len(names) - len(a) for a, _ in SETTINGS.values()))

    def test_plan_refuses_scheme_options_of_other_schemes(self):
        for spec, key in (("1f1b:halving", "variant"), ("gpipe:4", "pipes")):
            r = run("plan", "--model", LOCAL, "--memory", "64", "--cost", "1:2", "--predict",
                    "-D", "4", "-N", "8", "--schemes", spec)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(f"parallel.{key}", r.stderr)
            self.assertIn("applies to chimera only", r.stderr)

    def test_settings_where_they_apply_are_accepted(self):
        for key, (applies_to, value) in SETTINGS.items():
            for scheme in applies_to:
                _, args = list(commands(scheme, key, value))[1]
                r = run(*args)
                self.assertEqual(r.returncode, 0, f"{args}: {r.stderr}")


if __name__ == "__main__":
    unittest.main()
