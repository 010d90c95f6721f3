"""The ``kbv`` command line: :mod:`kbv.cli.main` (the app and the entry point),
:mod:`kbv.cli.common` (shared options, consoles, exit codes), the commands in :mod:`kbv.cli.verify`,
:mod:`kbv.cli.batch` and :mod:`kbv.cli.generate`."""
