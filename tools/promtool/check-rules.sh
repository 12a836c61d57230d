#!/usr/bin/env bash
# Checks every Prometheus rule Fleetwright ships or documents with promtool (make lint):
#   - each PrometheusRule under deploy/ (its spec is a rules file: groups: ...);
#   - each ```yaml block of docs/*.md and README.md whose first line is "groups:" (the alert
#     examples).
# Usage: check-rules.sh PROMTOOL   (run from the repository's root)
set -euo pipefail
promtool=${1:?usage: check-rules.sh PROMTOOL}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

n=0
while IFS= read -r f; do
  n=$((n + 1))
  # The spec's lines, two spaces less indented: a rules file.
  awk '/^spec:/ {on=1; next} on && /^[^ ]/ {on=0} on {sub(/^  /, ""); print}' "$f" >"$out/rule-$n.yaml"
  echo "promtool: $f"
done < <(grep -rl --include='*.yaml' '^kind: PrometheusRule' deploy | sort)

for f in docs/*.md README.md; do
  awk -v base="$out/doc-$(basename "$f" .md)" '
    /^```yaml[[:space:]]*$/ {inblock=1; first=1; next}
    inblock && /^```/ {inblock=0; if (file) close(file); file=""; next}
    inblock && first {first=0; if ($0 ~ /^groups:/) {k++; file=base "-" k ".yaml"} }
    inblock && file {print > file}
  ' "$f"
done
for f in "$out"/doc-*.yaml; do
  [ -e "$f" ] && echo "promtool: $(basename "$f") (an example in the docs)"
done

files=("$out"/*.yaml)
if [ ! -e "${files[0]}" ]; then
  echo "promtool: no rules found" >&2
  exit 1
fi
"$promtool" check rules "${files[@]}"
