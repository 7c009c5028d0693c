// placeholder: filled by the wire/roce_frame work
