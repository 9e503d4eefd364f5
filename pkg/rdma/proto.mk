# C unit tests of the HatRPC engine (hr_proto*.c), kept apart from the verbs
# core's Makefile:
#   make -C pkg/rdma -f proto.mk proto-ctest      build and run
#   make -C pkg/rdma -f proto.mk proto-sanitize   the same under ASan + UBSan
# O= selects the build directory.
O ?= build
CC ?= gcc
CFLAGS ?= -O2 -g
WFLAGS := -std=gnu11 -Wall -Wextra -Werror -pthread
LDLIBS := -libverbs -lpthread
CORE := $(wildcard hr_*.c)
HDRS := $(wildcard *.h)
PTEST := ctest/test_proto.c ctest/test_proto_spin.c ctest/test_proto_move.c ctest/proto_pair.c
SANFLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

.PHONY: proto-ctest proto-sanitize

proto-ctest: $(O)/test_proto
	$(O)/test_proto

proto-sanitize: $(O)/test_proto_san
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 $(O)/test_proto_san

$(O)/test_proto: $(CORE) $(PTEST) $(HDRS)
	mkdir -p $(O)
	$(CC) $(CFLAGS) $(WFLAGS) -o $@ $(CORE) $(PTEST) $(LDLIBS)

$(O)/test_proto_san: $(CORE) $(PTEST) $(HDRS)
	mkdir -p $(O)
	$(CC) $(SANFLAGS) $(WFLAGS) -o $@ $(CORE) $(PTEST) $(LDLIBS)
