"""/api/order-books/<pk>/: the latest published order book of an instrument, exact decimal strings.

Venue data, open to every authenticated caller like the live prices; an instrument whose
order book is not streamed is a 404. A stale book (its Redis key expired, or the
publisher is off) answers 200 with `fresh: false`, no levels and the reason, so a
client reads one shape and never mistakes an old book for the current one.
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from feeds.distribution.order_books import latest_order_book, order_book_instruments


class OrderBookView(APIView):
    @extend_schema(operation_id="order_book_retrieve", responses={200: dict})
    def get(self, request: Request, pk: int) -> Response:
        instrument = get_object_or_404(order_book_instruments(), pk=pk)
        book = latest_order_book(instrument)
        return Response(
            {
                "instrument": instrument.pk,
                "feed": instrument.feed.name,
                "venue": instrument.feed.venue,
                "market_type": instrument.feed.market_type,
                "symbol": instrument.symbol,
                "venue_symbol": instrument.venue_symbol,
                **book.as_json(),
            }
        )
