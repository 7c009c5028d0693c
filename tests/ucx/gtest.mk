# Builds UCX 1.13.1's gtest binary (test/gtest of the tarball) against
# Debian 12's UCX libraries, with no UCX library built (issue 53;
# ucx_gtest_test.sh runs it, docs/MIDDLEWARE.md "UCX's gtest").
#
#   make -f gtest.mk S=TREE GEN=DIR O=DIR SRCS='common/main.cc ...' [PERF=1] -j 2
#
#   S     the unpacked tarball (its src/ for UCX's internal headers, test/)
#   GEN   config.h (Debian's, from `ucx_info -b`) and the two version
#         headers configure makes (Debian's, from libucx-dev)
#   O     the objects and the binary, O/gtest
#   SRCS  the test sources, relative to S/test/gtest
#   PERF  1: also src/tools/perf/lib (libucxperf, which common/test_perf.cc
#         and uct/test_uct_perf.cc call), at -O1 as UCX builds it
#
# The flags are UCX's for its gtest (test/gtest/Makefile.am: -std=c++11,
# HAVE_CONFIG_H, src/ and test/ on the include path; -fopenmp for
# libucxperf, the only part with OpenMP pragmas), at -O0 (the quickest to compile; the tests wait on the
# network, not on their own code) with line tables only (-g1: a crash's
# backtrace has file:line). Warnings are UCX's business, not ours: UCX builds
# this with its own -Werror under GCC 11, and GCC 12 warns more.
# The binary links Debian's libuct_ib.so (which UCX loads as a module from
# the same directory: one copy) and libucs, libuct, libucp, libibverbs; the
# run puts urnic's libibverbs and librdmacm first (LD_LIBRARY_PATH).
G := $(S)/test/gtest
LIBDIR := /usr/lib/x86_64-linux-gnu
DEFS := -DHAVE_CONFIG_H '-DCPU_FLAGS=""' '-DTOP_SRCDIR="$(S)"' \
        '-DGTEST_UCM_HOOK_LIB_DIR="$(O)/no-ucm-hooks"'
INCS := -I$(GEN) -I$(S)/src -I$(S)/test -I$(G)
CXX_TEST := g++ -std=c++11 -O0 -g1 -w $(DEFS) $(INCS)
GTEST_LIB := gtest gtest-death-test gtest-filepath gtest-port gtest-printers gtest-test-part gtest-typed-test
PERF_LIB := libperf.c libperf_memory.c libperf_thread.c uct_tests.cc ucp_tests.cc

OBJS := $(patsubst %.cc,$(O)/t/%.o,$(SRCS)) $(patsubst %,$(O)/gt/%.o,$(GTEST_LIB))
OPENMP :=
ifeq ($(PERF),1)
OBJS += $(patsubst %,$(O)/perf/%.o,$(PERF_LIB))
OPENMP := -fopenmp
endif

$(O)/gtest: $(OBJS)
	g++ -o $@ $^ $(OPENMP) -Wl,--dynamic-list-data -L$(LIBDIR) -L$(LIBDIR)/ucx \
	    -Wl,-rpath,$(LIBDIR)/ucx -luct_ib -lucp -luct -lucs -libverbs -lpthread -ldl -lrt

$(O)/t/%.o: $(G)/%.cc
	@mkdir -p $(dir $@)
	$(CXX_TEST) -c $< -o $@

$(O)/gt/%.o: $(G)/common/googletest/%.cc
	@mkdir -p $(dir $@)
	$(CXX_TEST) -c $< -o $@

$(O)/perf/%.c.o: $(S)/src/tools/perf/lib/%.c
	@mkdir -p $(dir $@)
	gcc -std=gnu11 -O1 -g1 -w -fopenmp $(DEFS) $(INCS) -c $< -o $@

$(O)/perf/%.cc.o: $(S)/src/tools/perf/lib/%.cc
	@mkdir -p $(dir $@)
	g++ -std=c++11 -O1 -g1 -w -fopenmp -nostdlib $(DEFS) $(INCS) -c $< -o $@
