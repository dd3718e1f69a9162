"""Benchmarks run by `insync bench`: each measures insync beside a plain baseline in the same run."""
