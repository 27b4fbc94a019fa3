"""The ``qkv`` command line: parsing and printing only, over library functions."""
