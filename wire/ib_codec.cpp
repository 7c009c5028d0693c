// placeholder: filled by the wire/ib_codec work
