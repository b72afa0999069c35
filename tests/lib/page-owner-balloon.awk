# page-owner-balloon.awk: reads page_owner's stacks file
# (/sys/kernel/debug/page_owner_stacks/show_stacks, Linux 6.10+) and prints
# how many base pages are held now by allocations vmw_balloon asked of the
# page allocator itself: the stacks whose innermost vmw_balloon frame calls
# a page allocator entry (alloc_pages*, balloon_page_alloc) directly.
#
# The frame is matched by its module, not by the driver's function names:
# the driver's allocation helpers end in tail calls, which the compiler
# turns into jumps, so they never appear on a stack. Stacks through slab
# or kmalloc are not the balloon's and are left out; so are those of the
# driver's __init code, whose symbols are gone once it has run.
#
# The file: for each stack, one frame a line, innermost first, as
# " symbol+0xoff/0xlen [module]", then "nr_base_pages: N", then a blank line.
BEGIN {
	RS = ""
	FS = "\n"
}
{
	for (i = 1; i <= NF; i++) {
		if ($i !~ /\[vmw_balloon\]$/)
			continue
		if (i > 1 && $(i - 1) ~ /^ *([a-z_]*alloc_pages[a-z_]*|balloon_page_alloc)\+/ &&
		    match($0, /nr_base_pages: [0-9]+/))
			pages += substr($0, RSTART + 15, RLENGTH - 15)
		break
	}
}
END {
	print pages + 0
}
