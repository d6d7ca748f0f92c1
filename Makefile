# Conveniences for machines that have make; ./dev is the entry point and needs nothing.
.PHONY: run test test-fast e2e bench
run:
	./dev run
test:
	./dev test
test-fast:
	./dev test-fast
e2e:
	./dev e2e
bench:
	./dev bench
