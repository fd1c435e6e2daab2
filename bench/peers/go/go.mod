module corio.dev/bench/peers

go 1.21
