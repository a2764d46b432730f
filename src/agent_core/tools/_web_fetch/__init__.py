"""``code.web_fetch``: an HTTP(S) GET through the network policy, HTML converted to Markdown.

``definition`` holds the static tool definition (registered at open without importing the rest);
``client`` fetches (DNS resolved once, every address checked, the connection made to exactly a checked
address, redirects re-checked hop by hop, the body read up to a byte limit); ``convert`` turns HTML into
Markdown (``markdownify``); ``tool`` is the adapter the tool registry calls.
"""
