#!/usr/bin/env python3
"""Tests of bench/flamegraph.py on perf script text made up for them."""
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import flamegraph  # noqa: E402

SAMPLES = """client 1/1 1.0: 1 cpu-clock:
\t10 leaf_a+0x10 (/bin/x)
\t20 middle+0x4 (/bin/x)
\t30 main+0x1 (/bin/x)

client 1/1 1.1: 1 cpu-clock:
\t10 leaf_a+0x10 (/bin/x)
\t20 middle+0x4 (/bin/x)
\t30 main+0x1 (/bin/x)

client 1/1 1.2: 1 cpu-clock:
\t11 leaf_b (/bin/x)
\t30 main+0x1 (/bin/x)

client 1/1 1.3: 1 cpu-clock:
\t12 [unknown] (/usr/lib/libz.so.1)
\t30 main+0x1 (/bin/x)

server 2/2 1.4: 1 cpu-clock:
\t40 serve (/bin/x)
"""


class FoldTest(unittest.TestCase):
    def test_stacks_are_folded_root_first_and_counted(self):
        counts = flamegraph.fold(SAMPLES.splitlines(True))
        self.assertEqual(counts[("main", "middle", "leaf_a")], 2)
        self.assertEqual(counts[("main", "leaf_b")], 1)
        self.assertEqual(counts[("main", "[libz.so.1]")], 1)  # no symbol: its library
        self.assertEqual(counts[("serve",)], 1)

    def test_comm_keeps_only_those_threads(self):
        counts = flamegraph.fold(SAMPLES.splitlines(True), "serv")
        self.assertEqual(dict(counts), {("serve",): 1})

    def test_widths_are_shares_of_the_samples(self):
        out = subprocess.run([sys.executable, os.path.join(HERE, "flamegraph.py"), "--comm",
                              "client", "--title", "t"], input=SAMPLES, capture_output=True,
                             text=True, check=True).stdout
        self.assertTrue(out.startswith("<svg"))
        shares = dict(re.findall(r"<title>([^:<]+): \d+ samples, ([\d.]+)%</title>", out))
        self.assertEqual(shares["main"], "100.0")
        self.assertEqual(shares["middle"], "50.0")
        self.assertEqual(shares["leaf_b"], "25.0")
        self.assertIn("(4 samples)", out)

    def test_no_samples_is_an_error(self):
        r = subprocess.run([sys.executable, os.path.join(HERE, "flamegraph.py"), "--comm", "nope"],
                           input=SAMPLES, capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no samples", r.stderr)


if __name__ == "__main__":
    unittest.main()
