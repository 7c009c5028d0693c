// placeholder: filled by the wire/ip work
