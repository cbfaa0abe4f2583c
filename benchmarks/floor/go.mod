module dask-gpu-parity/benchmarks/floor

go 1.22
