; error: own_unit.s:2:40: store runs on unit store and may not signal its own unit
    store [0], acc[0], rows=16, signal=store
    halt
