"""Text for language models: Shakespeare, the King James Bible, a user's text files."""
