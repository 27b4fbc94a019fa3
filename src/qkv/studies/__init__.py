"""Studies: experiments that tell a story with several models, returning data for the CLI to print:
every score function learning a known alignment, and BLEU by source length."""
