# corpus.sh defines the workload generators bench/notebook.sh and bench/ratios.sh share
# (source it; the working directory is the repository root). Files of updates are u32le
# length-prefixed frames.

# rooms_corpus DIR SEED writes DIR/corpus/room-01.bin … room-20.bin: 20 notebooks of two
# collaborators each (~54k updates, testdata/ysessions/gen.mjs --bench), unless present.
rooms_corpus() {
	local dir=$1 seed=$2 i
	[ -f "$dir/corpus/done" ] && return
	echo "generating the 20 rooms into $dir/corpus" >&2
	rm -rf "$dir/corpus" "$dir/room"
	mkdir -p "$dir/corpus"
	for i in $(seq 1 20); do
		node testdata/ysessions/gen.mjs --bench --seed $((seed * 100 + i)) --updates 2700 --out "$dir/room" --no-state
		mv "$dir/room/updates.bin" "$(printf '%s/corpus/room-%02d.bin' "$dir" "$i")"
	done
	rmdir "$dir/room"
	touch "$dir/corpus/done"
}

# history_corpus DIR SEED UPDATES writes DIR/history/updates.bin: one notebook's history
# of UPDATES updates by two collaborators (the history of bench/run.sh), unless present.
history_corpus() {
	local dir=$1 seed=$2 updates=$3
	[ -f "$dir/history/done-$seed-$updates" ] && return
	echo "generating a history of $updates updates into $dir/history" >&2
	rm -rf "$dir/history"
	node testdata/ysessions/gen.mjs --bench --seed "$seed" --updates "$updates" --out "$dir/history" --no-state
	touch "$dir/history/done-$seed-$updates"
}

# sessions_corpus DIR writes DIR/sessions and DIR/sessions-ywasm: the recorded sessions of
# testdata/ysessions/fixtures merged into 20 rooms (bench/sessions.mjs), unless present.
sessions_corpus() {
	local dir=$1
	[ -f "$dir/sessions-ywasm/done" ] && return
	echo "writing the recorded sessions into $dir/sessions" >&2
	node bench/sessions.mjs --out "$dir"
	touch "$dir/sessions-ywasm/done"
}
