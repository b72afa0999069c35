# page-owner-balloon.awk: reads page_owner's stacks file
# (/sys/kernel/debug/page_owner_stacks/show_stacks, Linux 6.10+) and prints
# how many base pages are held now by allocations that vmw_balloon asked of
# the page allocator itself: the stacks whose innermost vmw_balloon frame
# calls a page allocator entry (alloc_pages*, __get_free_pages*,
# get_zeroed_page*, balloon_page_alloc*) directly.
#
# A vmw_balloon frame is one the kernel symbolized as "[vmw_balloon]" (the
# instance loaded now) or a bare address ("0xffffffffc0a1b2c3": code that is
# gone, an unloaded instance's or __init code that has run) inside one of
# the ranges in the file named by -v ranges=FILE: "START END" a line, the
# code sections of every instance loaded in this boot, as 16-digit
# lowercase hex, END excluded (tests/guest/debug-kernel.sh records them
# before each unload). Hex strings of one width compare as the numbers do;
# awk's numbers are doubles and cannot hold a 64-bit address exactly.
#
# The frame is matched by where its code is, not by the driver's function
# names: the driver's allocation helpers end in tail calls, which the
# compiler turns into jumps, so they never appear on a stack. Stacks
# through slab or kmalloc are not the balloon's and are left out (a slab
# page outlives the object the driver freed).
#
# The file: for each stack, one frame a line, innermost first, as
# " symbol+0xoff/0xlen [module]" or " 0xADDRESS", then "nr_base_pages: N",
# then a blank line.
BEGIN {
	nranges = 0
	if (ranges != "") {
		while ((getline line < ranges) > 0) {
			if (split(line, r, " ") != 2)
				continue
			nranges++
			lo[nranges] = tolower(r[1])
			hi[nranges] = tolower(r[2])
		}
		close(ranges)
	}
	RS = ""
	FS = "\n"
}

function ours(frame,    a, i) {
	if (frame ~ /\[vmw_balloon\]$/)
		return 1
	if (frame !~ /^ *0x[0-9a-f]+$/)
		return 0
	a = frame
	sub(/^ *0x/, "", a)
	a = tolower(a)
	while (length(a) < 16)
		a = "0" a
	for (i = 1; i <= nranges; i++)
		if (a >= lo[i] && a < hi[i])
			return 1
	return 0
}

{
	for (i = 1; i <= NF; i++) {
		if (!ours($i))
			continue
		if (i > 1 && $(i - 1) ~ /^ *([a-z_]*alloc_pages[a-z_]*|_*get_free_pages[a-z_]*|get_zeroed_page[a-z_]*|balloon_page_alloc[a-z_]*)\+/ &&
		    match($0, /nr_base_pages: [0-9]+/))
			pages += substr($0, RSTART + 15, RLENGTH - 15)
		break
	}
}
END {
	print pages + 0
}
