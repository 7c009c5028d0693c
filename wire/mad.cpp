// placeholder: filled by the wire/mad work
