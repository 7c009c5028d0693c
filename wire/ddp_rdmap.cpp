// placeholder: filled by the wire/ddp_rdmap work
