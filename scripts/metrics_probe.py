#!/usr/bin/python3
"""Fetches an ardmad --metrics endpoint and parses it with the Prometheus client library's own
text-format parser (Debian python3-prometheus-client), so a malformed exposition fails here.

  scripts/metrics_probe.py URL [--dashboard FILE]
Prints one "name{labels} value" line per sample, sorted; exits 1 if the text does not parse, or,
with --dashboard (a Grafana dashboard's JSON, packaging/grafana/), if a query of the dashboard
names a metric the endpoint does not serve.
"""
import json
import re
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def dashboard_metrics(path):
    """The metric names the dashboard's queries (and template variables) use."""
    with open(path, encoding="utf-8") as f:
        dashboard = json.load(f)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [v.get("query", "") for v in dashboard.get("templating", {}).get("list", [])
              if isinstance(v.get("query"), str)]
    return {m for e in exprs for m in re.findall(r"\b(?:ardma|process)_[a-z0-9_]+\b", e)}


def main():
    text = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode("utf-8")
    lines, served = [], set()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            served.add(s.name)
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            lines.append(f"{s.name}{{{labels}}} {s.value:g}")
    print("\n".join(sorted(lines)))
    if len(sys.argv) == 4 and sys.argv[2] == "--dashboard":
        missing = sorted(dashboard_metrics(sys.argv[3]) - served)
        if missing:
            print(f"metrics_probe: the dashboard queries metrics not served: {missing}",
                  file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # a parse error, or the endpoint unreachable
        print(f"metrics_probe: {e}", file=sys.stderr)
        sys.exit(1)
