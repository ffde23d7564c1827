"""Planning: a suite file or the command line -> settings and cells."""
