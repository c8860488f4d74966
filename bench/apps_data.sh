# The tools benchmarks' data (sourced by apps_compare.sh and tools_ab.sh):
#   apps_data DIR   writes DIR/text (256 MiB of C headers: /usr/include repeated) and DIR/tree
#                   (65 directories x 1,000 small files of 0 to 2,093 bytes).
apps_data() {
  local dir=$1
  echo "preparing 256 MiB of text and a 65,000-file tree in $dir ..." >&2
  find /usr/include -name '*.h' -type f -print0 | xargs -0 cat > "$dir/headers"
  while [[ $(stat -c %s "$dir/text" 2>/dev/null || echo 0) -lt 268435456 ]]; do
    cat "$dir/headers" >> "$dir/text"
  done
  truncate -s 268435456 "$dir/text"
  rm -f "$dir/headers"
  python3 - "$dir/tree" <<'PY'
import os, sys
root = sys.argv[1]
for d in range(65):
    os.makedirs(f"{root}/d{d:02d}")
    for f in range(1000):
        with open(f"{root}/d{d:02d}/f{f:04d}", "w") as out:
            out.write("x" * (f * 7 % 2094))
PY
}
