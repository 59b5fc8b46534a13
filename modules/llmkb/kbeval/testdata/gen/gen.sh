#!/bin/sh
# Makes the corpus's PDFs (Chromium prints the HTML in src/) and DOCX files
# (docx.go builds them from the markup in src/*.docx.txt). Run from this
# directory.
set -e
out=../corpus
for f in src/*.html; do
	name=$(basename "$f" .html)
	chromium --headless --no-sandbox --disable-gpu --no-pdf-header-footer \
		--print-to-pdf="$out/$name.pdf" "file://$PWD/$f" 2>/dev/null
done
for f in src/*.docx.txt; do
	go run docx.go "$f" "$out/$(basename "$f" .txt)"
done
