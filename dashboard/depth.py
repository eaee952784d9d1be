"""The depth view: an instrument's bids/asks ladder, live from its published order books.

Order books are venue data, shown to every logged-in user like the live prices; an
instrument whose order book is not streamed (no enabled `order_book` subscription on an
enabled feed) is a 404. The page renders the latest snapshot on the server and
`static/depth.js` refreshes it from the API route (`/api/order-books/<pk>/`).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from feeds.distribution.order_books import latest_order_book, order_book_instruments

# How often the page asks for the latest snapshot: about the fastest snapshot period
# the venues send at, so the ladder is never more than a period behind.
REFRESH_MS = 1000


@require_GET
def depth_index(request: HttpRequest) -> HttpResponse:
    return render(request, "depth/index.html", {"instruments": order_book_instruments()})


@require_GET
def depth_page(request: HttpRequest, pk: int) -> HttpResponse:
    instrument = get_object_or_404(order_book_instruments(), pk=pk)
    book = latest_order_book(instrument)
    return render(
        request,
        "depth/instrument.html",
        {"instrument": instrument, "book": book, "refresh_ms": REFRESH_MS},
    )
