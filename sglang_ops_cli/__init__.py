"""The `sglang-ops` command line (bin/sglang-ops): one module per subcommand."""
