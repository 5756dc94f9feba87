package fastpath

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-14 -strip llvm-strip-14 -target bpfel -type lpm_key -type subnet_info -type tunnel -type vtep_key -type vtep fastpath bpf/fastpath.c -- -O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu
