#!/usr/bin/env python3
"""Tests of bench/report.py on a made-up reproduce.sh run: the UCX tables beside the TCP ones, the
ratio of core_bench's UCX rows to UCX's own operations, and the hand-written text kept."""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import report  # noqa: E402


def bench(name, real_time, **counters):
    return dict(name=name, run_name=name, real_time=real_time, time_unit="ns", **counters)


def write_json(path, rows):
    with open(path, "w") as f:
        json.dump({"benchmarks": rows}, f)


SWEEP = """name,iterations,real_time,cpu_time,time_unit,rtt_us,model_us
"BM_Sweep/op:0/rdma:0/delay_us:0/real_time",10,1.5,1,us,0.4,1.4
"BM_Sweep/op:0/rdma:1/delay_us:0/real_time",10,0.9,1,us,0.2,0.8
"""


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.run = self.dir.name
        core = [bench("BM_ReadUcx/8/real_time/threads:1", 80, aggregate_name="median"),
                bench("BM_UcxOwnGet/8/real_time", 20, aggregate_name="median"),
                bench("BM_PingUcx/real_time/threads:1", 500, aggregate_name="median"),
                bench("BM_UcxOwnAmRoundTrip/real_time", 250, aggregate_name="median"),
                bench("BM_RawTcpPingPong/32/real_time/threads:1", 40000, aggregate_name="median"),
                bench("BM_Ping/real_time/threads:1", 50000, aggregate_name="median",
                      **{"round_trips/op": 1.0, "bytes/op": 64.0}),
                bench("BM_HandlerPing", 80, aggregate_name="median")]
        for b in core:
            b["run_name"] = b["name"]
        write_json(os.path.join(self.run, "core_bench.json"), core)
        write_json(os.path.join(self.run, "list_dht_bench_ucx.json"),
                   [bench("BM_DhtGet/rdma:0/real_time", 1000, **{"round_trips/op": 1.0}),
                    bench("BM_DhtGet/rdma:1/real_time", 700, **{"round_trips/op": 2.0})])
        with open(os.path.join(self.run, "latency_sweep_ucx.out"), "w") as f:
            f.write(SWEEP)
        self.doc = os.path.join(self.run, "BENCHMARKS.md")
        with open(self.doc, "w") as f:
            f.write(f"# Benchmarks\n\nhand-written\n\n{report.BEGIN}\nold\n{report.END}\ntail\n")

    def tearDown(self):
        self.dir.cleanup()

    def text(self):
        sys.argv = ["report.py", self.run, self.doc]
        report.main()
        with open(self.doc) as f:
            return f.read()

    def section(self, text, title):
        start = text.index(f"### {title}")
        return text[start:text.index("\n### ", start + 1)]

    def test_ucx_rows_are_compared_with_ucx_own_operations(self):
        core = self.section(self.text(), "Core ops")
        self.assertIn("| BM_ReadUcx/8/real_time/threads:1 | 80 ns |", core)
        self.assertIn("4.00× BM_UcxOwnGet/8", core)
        self.assertIn("2.00× BM_UcxOwnAmRoundTrip", core)
        # UCX's own rows, and UCX rows without a UCX counterpart, are not set against TCP.
        self.assertIn("| BM_UcxOwnGet/8/real_time | 20 ns | 0.00 | 0 |  |", core)
        # TCP rows are set against the raw ping-pong; the server alone (no round trip) is not.
        self.assertIn("1.25× BM_RawTcpPingPong/32", core)
        self.assertIn("| BM_HandlerPing | 80 ns | 0.00 | 0 |  |", core)

    def test_each_transport_has_its_own_table(self):
        lists = self.section(self.text(), "List and hash table")
        tcp, ucx = lists.split("#### Over UCX")
        self.assertIn("(no list_dht_bench.json in this run)", tcp)
        self.assertIn("| BM_DhtGet/rdma:1/real_time | 700 ns | 2.00 |", ucx)
        self.assertIn("0.70× BM_DhtGet/rdma:0", ucx)

    def test_sweep_over_ucx_keeps_sub_microsecond_figures(self):
        sweep = self.section(self.text(), "Latency sweep")
        self.assertIn("| DHT GET | 0 | 0.4 | 1.5 | 0.9 | 0.6× |", sweep.split("#### Over UCX")[1])

    def test_text_outside_the_markers_is_kept(self):
        text = self.text()
        self.assertTrue(text.startswith("# Benchmarks\n\nhand-written\n\n" + report.BEGIN))
        self.assertTrue(text.endswith(report.END + "\ntail\n"))
        self.assertNotIn("\nold\n", text)


if __name__ == "__main__":
    unittest.main()
