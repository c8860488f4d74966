#!/usr/bin/python3
"""Fetches an ardmad --metrics endpoint and parses it with the Prometheus client library's own
text-format parser (Debian python3-prometheus-client), so a malformed exposition fails here.

  scripts/metrics_probe.py http://127.0.0.1:PORT/metrics
Prints one "name{labels} value" line per sample, sorted; exits 1 if the text does not parse.
"""
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def main():
    text = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode("utf-8")
    lines = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            lines.append(f"{s.name}{{{labels}}} {s.value:g}")
    print("\n".join(sorted(lines)))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # a parse error, or the endpoint unreachable
        print(f"metrics_probe: {e}", file=sys.stderr)
        sys.exit(1)
