# Helpers for the CLI tests (sourced; not a test itself).

# st_set_meta IN OUT SED_EXPR: OUT is IN with its safetensors header (the JSON
# after the 8-byte little-endian length) edited by sed, the length rewritten.
st_set_meta() {
    local in=$1 out=$2 expr=$3 hlen hdr
    hlen=$(head -c 8 "$in" | od -An -tu8 | tr -d ' ')
    hdr=$(dd if="$in" bs=1 skip=8 count="$hlen" 2>/dev/null | sed -e "$expr")
    local n=${#hdr} bytes="" i
    for i in 0 1 2 3 4 5 6 7; do
        bytes="$bytes\\x$(printf '%02x' $(((n >> (8 * i)) & 255)))"
    done
    { printf "$bytes"; printf '%s' "$hdr"; tail -c +$((8 + hlen + 1)) "$in"; } >"$out"
}

# st_data_offset FILE: byte offset of the data section.
st_data_offset() {
    echo $((8 + $(head -c 8 "$1" | od -An -tu8 | tr -d ' ')))
}

# st_put_bytes FILE OFFSET PRINTF_BYTES: overwrite bytes in place.
st_put_bytes() {
    printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}

# cli_test_begin PATH_TO_TINYFOLD: BIN (absolute), a scratch directory TMP
# (removed on exit) as the working directory, and fail(), which counts into
# $fails what the test reports at its end.
cli_test_begin() {
    BIN=$(cd "$(dirname "${1:?usage: $0 path/to/tinyfold}")" && pwd)/$(basename "$1")
    TMP=$(mktemp -d)
    trap 'rm -rf "$TMP"' EXIT
    cd "$TMP" || exit 1
    fails=0
}
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
