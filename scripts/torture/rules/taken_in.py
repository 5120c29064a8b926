"""Which transactions every device of an account must come to hold (receipt saved, delivered,
finished): the client's replay takes in every transaction of the account the device lacks."""


def taken_in(t):
    """Whether every device of the account must come to hold transaction `t` (a server row): a
    book, an issue or a subscription period that stands, bought on any device, renewed by the store
    or approved. Credits are spent on the store, and a free re-buy stands on the purchase it points
    at."""
    return t["status"] == "purchased" and t["kind"] != "consumable" and t["paymentMethod"] != "owned"
