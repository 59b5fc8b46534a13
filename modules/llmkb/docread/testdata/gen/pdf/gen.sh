#!/bin/sh
# Prints the PDF fixtures from the HTML beside this script with headless
# Chromium, and encrypts one with qpdf. Run from this directory.
set -e
out=../..
for f in report newsletter pricetable scan datasheet lists; do
	chromium --headless --no-sandbox --disable-gpu --no-pdf-header-footer \
		--print-to-pdf="$out/$f.pdf" "file://$PWD/$f.html" 2>/dev/null
done
qpdf --encrypt user owner 256 -- "$out/report.pdf" "$out/encrypted.pdf"
qpdf --encrypt "" owner 128 --use-aes=y -- "$out/report.pdf" "$out/restricted.pdf"
# As a person prints a page from the browser: date, title, address and
# page numbers in the margins.
mkdir -p /tmp/intranet && cp report.html /tmp/intranet/quarterly-report.html
chromium --headless --no-sandbox --disable-gpu \
	--print-to-pdf="$out/report-printed.pdf" "file:///tmp/intranet/quarterly-report.html" 2>/dev/null
